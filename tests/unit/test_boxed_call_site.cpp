// Where ops called through torch.ops pass, in the real libtorch_python of Debian's torch 1.13,
// torch 2.6 (trixie root) and torch 2.14 (sid root): the exported invokeOperatorFromPython on
// 1.13 and 2.6, which takes the operators' vector; on 2.14, the local copy its thunk calls,
// which takes the vector's begin and size.
#include "symbolizer/aten/boxed_call_site.h"

#include <gtest/gtest.h>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/section_map.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

std::optional<BoxedCallSite> site_in(const testing::TorchInstall& torch) {
  const ElfFile elf(torch.library("libtorch_python"));
  const LibraryIndex index(elf);
  return find_boxed_call_site(index);
}

// The exported function's address, from its symbol.
uint64_t exported_address(const testing::TorchInstall& torch) {
  const ElfFile elf(torch.library("libtorch_python"));
  const DefinedSymbols symbols(elf);
  for (const DefinedSymbol& function : symbols.functions())
    if (function.name.starts_with("_ZN5torch3jit24invokeOperatorFromPython")) return function.address;
  return 0;
}

class BoxedCallSiteTest : public ::testing::TestWithParam<const testing::TorchInstall*> {};

TEST_P(BoxedCallSiteTest, IsTheFunctionThatTakesTheOperators) {
  const testing::TorchInstall& torch = *GetParam();
  if (const auto missing = torch.missing("libtorch_python")) GTEST_SKIP() << *missing;
  const auto site = site_in(torch);
  ASSERT_TRUE(site);
  const uint64_t exported = exported_address(torch);
  ASSERT_NE(exported, 0u);
  if (torch.version == "2.14") {
    EXPECT_EQ(site->operators, BoxedCallSite::Operators::kSpan);
    EXPECT_NE(site->address, exported) << "2.14's export is a thunk; the body is its callee";
    // 0xc65d40 in libtorch_python.so.2.14.1 (objdump): a function of its own, beginning endbr64.
    const ElfFile elf(torch.library("libtorch_python"));
    EXPECT_TRUE(SectionMap(elf).bytes_at(site->address).starts_with("\xf3\x0f\x1e\xfa"));
  } else {
    EXPECT_EQ(site->operators, BoxedCallSite::Operators::kVector);
    EXPECT_EQ(site->address, exported);
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, BoxedCallSiteTest,
                         ::testing::Values(&testing::debian_torch113(), &testing::trixie_torch26(),
                                           &testing::sid_torch214()),
                         [](const auto& info) { return info.param->name; });

TEST(BoxedCallSite, ALibraryWithoutItHasNone) {
  const ElfFile elf("/proc/self/exe");
  const LibraryIndex index(elf);
  EXPECT_FALSE(find_boxed_call_site(index));
}

}  // namespace
}  // namespace tprof::symbolizer
