// The named C++ scopes of the real libtorch_cpu (Debian's torch 1.13, torch 2.6 in the trixie
// root, torch 2.14 in the sid root, which passes the names as string_views on the stack): the
// functions that open RECORD_FUNCTION("<literal>") ranges, among them autograd's detach and
// detach_, which torch's profiler shows on every SGD-with-momentum step.
#include "symbolizer/autograd/named_scopes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/x86_disassembler.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

class NamedScopesTest : public ::testing::TestWithParam<testing::TorchInstall> {
 protected:
  void SetUp() override {
    if (const auto missing = GetParam().missing("libtorch_cpu")) GTEST_SKIP() << *missing;
    elf_ = std::make_unique<ElfFile>(GetParam().library("libtorch_cpu"));
    index_ = std::make_unique<LibraryIndex>(*elf_);
  }

  std::unique_ptr<ElfFile> elf_;
  std::unique_ptr<LibraryIndex> index_;
};

TEST_P(NamedScopesTest, FindsAutogradsDetachAmongFunctionsOpeningOneNamedRange) {
  const NamedScopes found = find_named_scopes(*index_);
  std::cout << found.source << ":";
  std::map<std::string, int> functions_by_name;
  std::set<uint64_t> addresses;
  for (const NamedScope& scope : found.scopes) {
    std::cout << " " << scope.name;
    ++functions_by_name[scope.name];
    EXPECT_TRUE(addresses.insert(scope.function_address).second) << "one name per function";
    // A function entry: the bytes there decode as an instruction.
    X86Disassembler disassembler;
    EXPECT_NE(disassembler.decode(scope.function_address, index_->sections.bytes_at(scope.function_address)), nullptr)
        << scope.name;
  }
  std::cout << "\n";
  EXPECT_EQ(functions_by_name["detach"], 1);
  EXPECT_EQ(functions_by_name["detach_"], 1);
  EXPECT_GE(found.scopes.size(), 5u);
  EXPECT_TRUE(found.why_none.empty()) << found.why_none;
}

// A library that has no RecordFunction::before at all (this test binary): none found, and the
// reason, which tprof prints as a warning, says what is missing.
TEST(NamedScopes, FindingNoneSaysWhy) {
  const ElfFile elf(std::filesystem::read_symlink("/proc/self/exe").string());
  const LibraryIndex index(elf);
  const NamedScopes found = find_named_scopes(index);
  EXPECT_TRUE(found.scopes.empty());
  EXPECT_FALSE(found.why_none.empty());
  std::cout << "why none: " << found.why_none << "\n";
}

INSTANTIATE_TEST_SUITE_P(Torch, NamedScopesTest,
                         ::testing::Values(testing::debian_torch113(), testing::trixie_torch26(), testing::sid_torch214()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tprof::symbolizer
