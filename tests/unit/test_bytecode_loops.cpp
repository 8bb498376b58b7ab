// Backward jumps decoded from real bytecode of CPython 3.9-3.14 (tests/unit/data/bytecode_loops,
// written by make_bytecode_loop_vectors.py): co_code as compiled and, on 3.11+, co_code_adaptive
// after the interpreter specialized it, each against the jumps dis finds in it; where the vector
// has it, co_code_adaptive instrumented for a profiler, against the jumps of co_code.
#include "symbolizer/python/bytecode_loops.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/test_environment.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return bytes;
}

std::vector<std::vector<uint32_t>> as_pairs(const std::vector<BackwardJump>& jumps) {
  std::vector<std::vector<uint32_t>> pairs;
  for (const BackwardJump& jump : jumps) pairs.push_back({jump.from, jump.to});
  return pairs;
}

class BytecodeLoops : public ::testing::TestWithParam<std::string> {};

TEST_P(BytecodeLoops, DecodesTheBackwardJumpsDisFinds) {
  std::ifstream file(fs::path(testing::source_dir()) / "tests/unit/data/bytecode_loops" / (GetParam() + ".json"));
  ASSERT_TRUE(file) << GetParam();
  const json vector = json::parse(file);
  const PythonVersion version{.major = vector["version"][0], .minor = vector["version"][1], .micro = vector["version"][2]};
  for (const json& function : vector["functions"]) {
    const std::string name = function["name"];
    const auto jumps = backward_jumps(version, from_hex(function["code"]));
    ASSERT_TRUE(jumps) << name;
    EXPECT_EQ(as_pairs(*jumps), function["jumps"].get<std::vector<std::vector<uint32_t>>>()) << name;
    if (function["adaptive"].is_null()) continue;
    const auto adaptive = backward_jumps(version, from_hex(function["adaptive"]));
    ASSERT_TRUE(adaptive) << name << " (specialized)";
    EXPECT_EQ(as_pairs(*adaptive), function["adaptive_jumps"].get<std::vector<std::vector<uint32_t>>>())
        << name << " (specialized)";
    if (!function.contains("instrumented") || function["instrumented"].is_null()) continue;
    const auto instrumented = backward_jumps(version, from_hex(function["instrumented"]));
    ASSERT_TRUE(instrumented) << name << " (instrumented)";
    EXPECT_EQ(as_pairs(*instrumented), function["jumps"].get<std::vector<std::vector<uint32_t>>>()) << name << " (instrumented)";
  }
}

INSTANTIATE_TEST_SUITE_P(Interpreters, BytecodeLoops,
                         ::testing::Values("pyenv-3.9.18", "pyenv-3.10.13", "pyenv-3.11.7", "pyenv-3.12.1",
                                           "pyenv-3.13.0", "debian-bookworm-3.11.2", "debian-trixie-3.13.5",
                                           "debian-sid-3.14.10"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-' || c == '.') c = '_';
                           return name;
                         });

TEST(BytecodeLoops, ALoopSpansTwoInstructionsOnlyIfItJumpsBackOverBoth) {
  // for_loop on 3.11: the loop body runs from 5 to 12, where it jumps back.
  const std::vector<BackwardJump> jumps = {{12, 5}};
  EXPECT_TRUE(loop_spans(jumps, 6, 10));
  EXPECT_TRUE(loop_spans(jumps, 5, 12));
  EXPECT_FALSE(loop_spans(jumps, 2, 10)) << "before the loop";
  EXPECT_FALSE(loop_spans(jumps, 6, 14)) << "after the loop";
  EXPECT_FALSE(loop_spans({}, 1, 2)) << "no loop at all";
}

TEST(BytecodeLoops, WhatCannotBeDecodedWithCertaintyIsNotGuessed) {
  EXPECT_FALSE(backward_jumps({.major = 3, .minor = 15}, std::vector<uint8_t>{0, 0})) << "an unknown version";
  EXPECT_FALSE(backward_jumps({.major = 3, .minor = 12}, std::vector<uint8_t>{254, 0})) << "INSTRUMENTED_LINE";
  EXPECT_FALSE(backward_jumps({.major = 3, .minor = 13}, std::vector<uint8_t>{70, 0})) << "ENTER_EXECUTOR";
  EXPECT_FALSE(backward_jumps({.major = 3, .minor = 14}, std::vector<uint8_t>{255, 0})) << "ENTER_EXECUTOR";
  EXPECT_FALSE(backward_jumps({.major = 3, .minor = 14}, std::vector<uint8_t>{254, 0})) << "INSTRUMENTED_LINE";
  EXPECT_FALSE(backward_jumps({.major = 3, .minor = 11}, std::vector<uint8_t>{140, 9})) << "a jump before the code";
  EXPECT_FALSE(backward_jumps({.major = 3, .minor = 11}, std::vector<uint8_t>{140})) << "half a code unit";
}

}  // namespace
}  // namespace tprof::symbolizer
