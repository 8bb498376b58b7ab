// Autograd probe sites of the real libtorch_cpu of Debian's torch 1.13 and of torch 2.6 in the
// trixie root. The expected offsets are this Debian build's, checked live with gdb: a
// breakpoint at load bias + evaluate_function fired once per backward node, and at it
// *(uint64_t*)(rdx + sequence_nr_offset) and *(uint64_t*)(rdx + thread_id_offset) were the
// sequence_nr and fwd_thread that torch.autograd.profiler.profile(use_kineto=False) reported
// for the same nodes (forward run on a second thread, so thread ids 2, not 1). A breakpoint at
// MmBackward0::apply / AccumulateGrad::apply had the node evaluate_function got in rsi (rdi is
// the returned vector's slot).
#include "symbolizer/autograd/autograd_sites.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "symbolizer/binary/class_hierarchy.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/library_index.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

struct ExpectedSites {
  uint64_t evaluate_function;
  uint64_t accumulate_grad_apply;
  uint64_t mm_backward_apply;
  size_t apply_sites;  // every exported apply(std::vector<at::Tensor>&&) is a Node's
};

const NodeApplySite* find_site(const AutogradSites& sites, const std::string& class_name) {
  auto found =
      std::find_if(sites.apply_sites.begin(), sites.apply_sites.end(),
                   [&](const NodeApplySite& site) { return site.class_name == class_name; });
  return found == sites.apply_sites.end() ? nullptr : &*found;
}

// The typeinfo chains that decide which apply() symbols are Node overrides. Every exported
// apply(std::vector<at::Tensor>&&) is a Node's, so the negative cases come from elsewhere.
void expect_hierarchy(const std::string& library) {
  const ElfFile elf(library);
  const LibraryIndex index(elf);
  const ClassHierarchy hierarchy(index.symbols, index.relocations, index.sections);
  constexpr std::string_view kNode = "_ZTIN5torch8autograd4NodeE";
  // MmBackward0 -> TraceableFunction (hidden: reached by address) -> Node.
  EXPECT_TRUE(hierarchy.derives_from("_ZTIN5torch8autograd9generated11MmBackward0E", kNode));
  // Node's own typeinfo lists its base enable_shared_from_this at offset 8 (__vmi_class_type_info).
  EXPECT_TRUE(
      hierarchy.derives_from(kNode, "_ZTISt23enable_shared_from_thisIN5torch8autograd4NodeEE"));
  // A base defined in another library (libc10) is known by its symbol only.
  EXPECT_TRUE(
      hierarchy.derives_from("_ZTIN2at23FunctionalTensorWrapperE", "_ZTIN3c1010TensorImplE"));
  EXPECT_FALSE(hierarchy.derives_from("_ZTIN2at23FunctionalTensorWrapperE", kNode));
  EXPECT_FALSE(hierarchy.derives_from("_ZTIN5torch8autograd9NotAClassE", kNode));
}

void expect_sites(const std::string& library, const ExpectedSites& expected) {
  const ElfFile elf(library);
  const AutogradSites sites = find_autograd_sites(LibraryIndex(elf));
  SCOPED_TRACE(sites.source);

  EXPECT_EQ(sites.evaluate_function, expected.evaluate_function);
  EXPECT_EQ(sites.apply_sites.size(), expected.apply_sites);
  const NodeApplySite* accumulate_grad = find_site(sites, "torch::autograd::AccumulateGrad");
  ASSERT_NE(accumulate_grad, nullptr);
  EXPECT_EQ(accumulate_grad->file_offset, expected.accumulate_grad_apply);
  const NodeApplySite* mm_backward = find_site(sites, "MmBackward0");
  ASSERT_NE(mm_backward, nullptr);
  EXPECT_EQ(mm_backward->file_offset, expected.mm_backward_apply);
  EXPECT_NE(find_site(sites, "AddmmBackward0"), nullptr);
  // Nodes outside torch::autograd are found through their typeinfo, not their namespace.
  EXPECT_NE(find_site(sites, "torch::distributed::autograd::RecvRpcBackward"), nullptr);
  EXPECT_EQ(find_site(sites, "torch::autograd::generated::MmBackward0"), nullptr)
      << "generated nodes go by their bare class name";
  EXPECT_TRUE(std::is_sorted(
      sites.apply_sites.begin(), sites.apply_sites.end(),
      [](const NodeApplySite& a, const NodeApplySite& b) { return a.class_name < b.class_name; }));

  // {vptr; enable_shared_from_this (16); sequence_nr_; topological_nr_; has_parent_;
  // thread_id_; ...} in both versions.
  EXPECT_EQ(sites.sequence_nr_offset, 24u);
  EXPECT_EQ(sites.thread_id_offset, 48u);
  EXPECT_NE(sites.source.find("AccumulateGrad::AccumulateGrad(at::Tensor)"), std::string::npos);
}

TEST(AutogradSites, Torch113) {
  const testing::TorchInstall& torch = testing::debian_torch113();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  expect_sites(torch.library("libtorch_cpu"), {.evaluate_function = 0x3b37350,
                                               .accumulate_grad_apply = 0x3b43f40,
                                               .mm_backward_apply = 0x3086920,
                                               .apply_sites = 606});
}

TEST(AutogradSites, NodeOverridesAreFoundThroughTypeinfoTorch113) {
  const testing::TorchInstall& torch = testing::debian_torch113();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  expect_hierarchy(torch.library("libtorch_cpu"));
}

TEST(AutogradSites, NodeOverridesAreFoundThroughTypeinfoTorch26) {
  const testing::TorchInstall& torch = testing::trixie_torch26();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  expect_hierarchy(torch.library("libtorch_cpu"));
}

TEST(AutogradSites, Torch26) {
  const testing::TorchInstall& torch = testing::trixie_torch26();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  expect_sites(torch.library("libtorch_cpu"), {.evaluate_function = 0x60df7f0,
                                               .accumulate_grad_apply = 0x60ed2d0,
                                               .mm_backward_apply = 0x53ba930,
                                               .apply_sites = 706});
}

}  // namespace
}  // namespace tprof::symbolizer
