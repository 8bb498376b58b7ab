// The `ret` sites of the real libtorch_cpu functions tprof closes ranges at (Debian's torch
// 1.13 and torch 2.6 in the trixie root): every op's call function has one, and every site
// found is a `ret` instruction.
#include "symbolizer/binary/function_exits.h"

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>

#include "symbolizer/autograd/autograd_sites.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/library_index.h"
#include "symbolizer/aten/op_catalog.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

// ret (c3), ret imm16 (c2), and `repz ret` (f3 c3), which older GCC emitted after a branch.
bool is_ret_instruction(const SectionMap& sections, uint64_t address) {
  const std::string_view bytes = sections.bytes_at(address);
  if (bytes.empty()) return false;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  return byte(0) == 0xc3 || byte(0) == 0xc2 || (bytes.size() > 1 && byte(0) == 0xf3 && byte(1) == 0xc3);
}

struct ExitCensus {
  size_t functions = 0;
  size_t without_return = 0;
  size_t not_a_ret = 0;
  std::map<size_t, size_t> by_return_count;  // how many functions have N rets
};

class FunctionExitsTest : public ::testing::TestWithParam<testing::TorchInstall> {
 protected:
  void SetUp() override {
    if (const auto missing = GetParam().missing("libtorch_cpu")) GTEST_SKIP() << *missing;
    elf_ = std::make_unique<ElfFile>(GetParam().library("libtorch_cpu"));
    index_ = std::make_unique<LibraryIndex>(*elf_);
    bounds_ = std::make_unique<FunctionBounds>(*elf_, index_->sections);
    finder_ = std::make_unique<FunctionExitFinder>(index_->sections, *bounds_);
  }

  FunctionExits exits_of(uint64_t address) { return finder_->exits_of(address); }

  void count(ExitCensus& census, const FunctionExits& exits) const {
    ++census.functions;
    if (exits.returns.empty()) ++census.without_return;
    ++census.by_return_count[exits.returns.size()];
    for (const uint64_t ret : exits.returns)
      if (!is_ret_instruction(index_->sections, ret)) ++census.not_a_ret;
  }

  static std::string describe(const ExitCensus& census) {
    std::string text = std::to_string(census.functions) + " functions; by ret count:";
    for (const auto& [rets, functions] : census.by_return_count)
      text += " " + std::to_string(rets) + ":" + std::to_string(functions);
    return text;
  }

  std::unique_ptr<ElfFile> elf_;
  std::unique_ptr<LibraryIndex> index_;
  std::unique_ptr<FunctionBounds> bounds_;
  std::unique_ptr<FunctionExitFinder> finder_;
};

TEST_P(FunctionExitsTest, EveryOpCallFunctionHasARet) {
  const OpCatalog catalog = build_op_catalog(GetParam().library("libtorch_cpu"));
  ExitCensus census;
  for (const OpCatalogEntry& entry : catalog.entries) count(census, exits_of(entry.site.symbol_address));
  std::cout << "op call functions: " << describe(census) << "\n";
  SCOPED_TRACE(describe(census));
  EXPECT_EQ(census.functions, catalog.entries.size());
  EXPECT_EQ(census.without_return, 0u);
  EXPECT_EQ(census.not_a_ret, 0u);
  // The dispatcher's call path: nearly every ::call has its single ret in its own code.
  EXPECT_GE(census.by_return_count[1], census.functions * 99 / 100);
}

TEST_P(FunctionExitsTest, AutogradFunctionsExitsAreRets) {
  const AutogradSites sites = find_autograd_sites(*index_);
  ASSERT_NE(sites.evaluate_function_address, 0u);
  ExitCensus census;
  count(census, exits_of(sites.evaluate_function_address));
  EXPECT_EQ(census.without_return, 0u) << "Engine::evaluate_function";
  for (const NodeApplySite& site : sites.apply_sites) count(census, exits_of(site.address));
  std::cout << "evaluate_function and Node::apply: " << describe(census) << "\n";
  SCOPED_TRACE(describe(census));
  EXPECT_EQ(census.not_a_ret, 0u);
  // A node that only throws (torch::autograd::Error) has no ret: the catch closes it. Any
  // more than a handful means the search is missing code.
  EXPECT_LE(census.without_return, 5u);
}

TEST_P(FunctionExitsTest, AnAddressOutsideEveryFunctionHasNoExits) {
  const FunctionExits exits = exits_of(0);
  EXPECT_TRUE(exits.returns.empty());
  EXPECT_EQ(exits.fragments, 0u);
}

INSTANTIATE_TEST_SUITE_P(Torch, FunctionExitsTest,
                         ::testing::Values(testing::debian_torch113(), testing::trixie_torch26(), testing::sid_torch214()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tprof::symbolizer
