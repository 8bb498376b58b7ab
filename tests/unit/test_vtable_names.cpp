// Naming autograd nodes from their vptr, against the real libtorch_cpu of Debian's torch 1.13
// and of torch 2.6 in the trixie root. The live vptrs below are what gdb read from an
// MmBackward0 node at Engine::evaluate_function, minus the library's load bias (its first
// mapping's start: its first PT_LOAD has vaddr 0).
#include "symbolizer/binary/vtable_names.h"

#include <gtest/gtest.h>

#include <string>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

// An object's vptr points past offset-to-top and the typeinfo pointer.
constexpr uint64_t kVtableHeader = 16;

TEST(ProfilerNodeName, StripsOnlyTheGeneratedNamespace) {
  EXPECT_EQ(profiler_node_name("torch::autograd::generated::MmBackward0"), "MmBackward0");
  EXPECT_EQ(profiler_node_name("torch::autograd::AccumulateGrad"),
            "torch::autograd::AccumulateGrad");
  EXPECT_EQ(profiler_node_name("torch::distributed::autograd::RecvRpcBackward"),
            "torch::distributed::autograd::RecvRpcBackward");
}

TEST(ClassOfRttiSymbol, DemanglesVtablesAndTypeinfos) {
  EXPECT_EQ(class_of_rtti_symbol("_ZTVN5torch8autograd9generated11MmBackward0E"),
            "torch::autograd::generated::MmBackward0");
  EXPECT_EQ(class_of_rtti_symbol("_ZTIN5torch8autograd14AccumulateGradE"),
            "torch::autograd::AccumulateGrad");
  EXPECT_EQ(class_of_rtti_symbol("_ZN2at14RecordFunction3endEv"), std::nullopt);
  EXPECT_EQ(class_of_rtti_symbol("_ZTVgarbage"), std::nullopt);
}

void expect_names(const std::string& library, uint64_t live_mm_backward_vptr) {
  const ElfFile elf(library);
  const DefinedSymbols symbols(elf);
  const VtableNames names(symbols);

  const DefinedSymbol* mm_backward = symbols.find("_ZTVN5torch8autograd9generated11MmBackward0E");
  ASSERT_NE(mm_backward, nullptr);
  EXPECT_EQ(mm_backward->address + kVtableHeader, live_mm_backward_vptr);
  EXPECT_EQ(names.class_at(live_mm_backward_vptr), "torch::autograd::generated::MmBackward0");
  EXPECT_EQ(names.node_name_at(live_mm_backward_vptr), "MmBackward0");

  const DefinedSymbol* accumulate_grad = symbols.find("_ZTVN5torch8autograd14AccumulateGradE");
  ASSERT_NE(accumulate_grad, nullptr);
  EXPECT_EQ(names.node_name_at(accumulate_grad->address + kVtableHeader),
            "torch::autograd::AccumulateGrad");

  // Not inside any vtable: code, and an object that is no vtable.
  const DefinedSymbol* end = symbols.find("_ZN2at14RecordFunction3endEv");
  ASSERT_NE(end, nullptr);
  EXPECT_EQ(names.class_at(end->address), std::nullopt);
  const DefinedSymbol* typeinfo = symbols.find("_ZTIN5torch8autograd4NodeE");
  ASSERT_NE(typeinfo, nullptr);
  EXPECT_EQ(names.class_at(typeinfo->address), std::nullopt);
}

TEST(VtableNames, Torch113) {
  const testing::TorchInstall& torch = testing::debian_torch113();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  // gdb: vptr 0x7ffff65a8120, libtorch_cpu mapped from 0x7fffef400000.
  expect_names(torch.library("libtorch_cpu"), 0x71a8120);
}

TEST(VtableNames, Torch26) {
  const testing::TorchInstall& torch = testing::trixie_torch26();
  if (const auto missing = torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  // gdb: vptr 0x7f642f8cc918, libtorch_cpu mapped from 0x7f6420400000.
  expect_names(torch.library("libtorch_cpu"), 0xf4cc918);
}

}  // namespace
}  // namespace tprof::symbolizer
