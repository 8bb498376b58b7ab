// The three line-table decoders: hand-built tables for each entry kind and each way a table can
// be damaged, then the tables real interpreters wrote, checked at every code unit against the
// line the interpreter itself reports (tests/unit/data/make_line_table_vectors.py).
#include "symbolizer/python/line_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/test_environment.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;

int lnotab_line(const std::vector<uint8_t>& table, int first_line, uint32_t byte_offset) {
  return line_for_instruction(LineTableFormat::kLnotab, table, first_line, byte_offset);
}

int pep626_line(const std::vector<uint8_t>& table, int first_line, uint32_t code_unit) {
  return line_for_instruction(LineTableFormat::kPep626Linetable, table, first_line, code_unit);
}

int location_line(const std::vector<uint8_t>& table, int first_line, uint32_t code_unit) {
  return line_for_instruction(LineTableFormat::kLocationTable, table, first_line, code_unit);
}

// The first byte of a 3.11+ location entry: 1cccclll.
constexpr uint8_t location_entry(uint8_t code, uint8_t length_in_code_units) {
  return static_cast<uint8_t>(0x80 | (code << 3) | (length_in_code_units - 1));
}

// ---- format per version -------------------------------------------------------------------

TEST(LineTableFormatFor, FollowsTheCPythonVersion) {
  EXPECT_EQ(line_table_format_for({3, 5, 0}), std::nullopt);
  EXPECT_EQ(line_table_format_for({3, 9, 18}), LineTableFormat::kLnotab);
  EXPECT_EQ(line_table_format_for({3, 10, 13}), LineTableFormat::kPep626Linetable);
  EXPECT_EQ(line_table_format_for({3, 11, 7}), LineTableFormat::kLocationTable);
  EXPECT_EQ(line_table_format_for({3, 14, 0}), LineTableFormat::kLocationTable);
  EXPECT_EQ(line_table_format_for({2, 7, 18}), std::nullopt);
}

// ---- 3.9 co_lnotab --------------------------------------------------------------------------

TEST(Lnotab, AnEmptyTablePutsEverythingOnTheFirstLine) {
  EXPECT_EQ(lnotab_line({}, 7, 0), 7);
  EXPECT_EQ(lnotab_line({}, 7, 1000), 7);
}

TEST(Lnotab, EachPairAdvancesTheOffsetThenTheLine) {
  // Bytes 0-5 on line 10, 6-9 on 11, 10+ on 8 (a line delta of -3 as a signed byte).
  const std::vector<uint8_t> table = {6, 1, 4, 0xfd};
  EXPECT_EQ(lnotab_line(table, 10, 0), 10);
  EXPECT_EQ(lnotab_line(table, 10, 4), 10);
  EXPECT_EQ(lnotab_line(table, 10, 6), 11);
  EXPECT_EQ(lnotab_line(table, 10, 8), 11);
  EXPECT_EQ(lnotab_line(table, 10, 10), 8);
  // Like PyCode_Addr2Line, the last line runs on past the table.
  EXPECT_EQ(lnotab_line(table, 10, 5000), 8);
}

TEST(Lnotab, ChainedPairsCarryJumpsTooLargeForOneByte) {
  // Offset +300 as (255, 0)(45, 0); line +200 as (0, 127)(2, 73).
  const std::vector<uint8_t> table = {255, 0, 45, 0, 0, 127, 2, 73};
  EXPECT_EQ(lnotab_line(table, 1, 298), 1);
  EXPECT_EQ(lnotab_line(table, 1, 300), 128);
  EXPECT_EQ(lnotab_line(table, 1, 302), 201);
}

TEST(Lnotab, AnOddTrailingByteIsIgnored) {
  EXPECT_EQ(lnotab_line({4, 2, 9}, 1, 4), 3);
}

// ---- 3.10 co_linetable ----------------------------------------------------------------------

TEST(Pep626Linetable, RangesAreInBytesAndLookupsInCodeUnits) {
  // Bytes 0-5 (units 0-2) on line 5, bytes 6-9 (units 3-4) on 7.
  const std::vector<uint8_t> table = {6, 0, 4, 2};
  EXPECT_EQ(pep626_line(table, 5, 0), 5);
  EXPECT_EQ(pep626_line(table, 5, 2), 5);
  EXPECT_EQ(pep626_line(table, 5, 3), 7);
  EXPECT_EQ(pep626_line(table, 5, 4), 7);
}

TEST(Pep626Linetable, MinusOneTwentyEightIsNoLineAndKeepsTheRunningLine) {
  // Units 0-1 on line 5, 2-3 without a line, 4 on 5 + 1.
  const std::vector<uint8_t> table = {4, 0, 4, 0x80, 2, 1};
  EXPECT_EQ(pep626_line(table, 5, 1), 5);
  EXPECT_EQ(pep626_line(table, 5, 2), -1);
  EXPECT_EQ(pep626_line(table, 5, 3), -1);
  EXPECT_EQ(pep626_line(table, 5, 4), 6);
}

TEST(Pep626Linetable, ZeroLengthPairsOnlyMoveTheLine) {
  // Line -200 as (0, -127)(2, -73), then +254 bytes on the same line as (254, 0).
  const std::vector<uint8_t> table = {0, 0x81, 2, 0xb7, 254, 0};
  EXPECT_EQ(pep626_line(table, 300, 0), 100);
  EXPECT_EQ(pep626_line(table, 300, 1), 100);
  EXPECT_EQ(pep626_line(table, 300, 127), 100);
}

TEST(Pep626Linetable, PastTheEndHasNoLine) {
  EXPECT_EQ(pep626_line({4, 0}, 5, 2), -1);
  EXPECT_EQ(pep626_line({}, 5, 0), -1);
}

// ---- 3.11+ location table -------------------------------------------------------------------

TEST(LocationTable, EveryEntryKindMovesTheLineAsLocationsMdSays) {
  const std::vector<uint8_t> table = {
      location_entry(0, 2), 0x05,                // units 0-1: short form, same line (10)
      location_entry(11, 1), 4, 9,               // unit 2: one-line form, +1 (11)
      location_entry(12, 3), 0, 1,               // units 3-5: one-line form, +2 (13)
      location_entry(13, 1), 0x07,               // unit 6: no columns, -3 (10)
      location_entry(15, 2),                     // units 7-8: no location
      location_entry(14, 1), 0x60, 0x0c, 0, 1, 2,  // unit 9: long form, +400 (410)
      location_entry(10, 1), 1, 2,               // unit 10: one-line form, +0 (410)
      location_entry(9, 8), 0x11,                // units 11-18: short form, same line (410)
  };
  const std::vector<int> expected = {10, 10, 11, 13, 13, 13, 10, -1, -1, 410, 410,
                                     410, 410, 410, 410, 410, 410, 410, 410};
  for (uint32_t unit = 0; unit < expected.size(); ++unit) {
    EXPECT_EQ(location_line(table, 10, unit), expected[unit]) << "code unit " << unit;
  }
  EXPECT_EQ(location_line(table, 10, static_cast<uint32_t>(expected.size())), -1);
}

TEST(LocationTable, NoLocationLeavesTheRunningLineForTheNextEntry) {
  const std::vector<uint8_t> table = {location_entry(11, 1), 0, 1, location_entry(15, 1),
                                      location_entry(0, 1), 0};
  EXPECT_EQ(location_line(table, 20, 0), 21);
  EXPECT_EQ(location_line(table, 20, 1), -1);
  EXPECT_EQ(location_line(table, 20, 2), 21);
}

TEST(LocationTable, ADamagedTableKeepsTheEntriesBeforeTheDamage) {
  // A long-form line delta whose varint runs off the end.
  const std::vector<uint8_t> truncated = {location_entry(0, 1), 0, location_entry(14, 1), 0x40};
  EXPECT_EQ(location_line(truncated, 3, 0), 3);
  EXPECT_EQ(location_line(truncated, 3, 1), -1);
  // A table that does not start at an entry.
  EXPECT_EQ(location_line({0x05, location_entry(0, 1), 0}, 3, 0), -1);
  // A varint longer than 32 bits.
  const std::vector<uint8_t> endless = {location_entry(13, 1), 0x40, 0x40, 0x40, 0x40, 0x40,
                                        0x40, 0x01};
  EXPECT_EQ(location_line(endless, 3, 0), -1);
}

// ---- vectors from real interpreters ---------------------------------------------------------

// One file per interpreter; `-no-debug-ranges` files come from `python -X no_debug_ranges`,
// which writes the no-column entry kind (code 13) throughout.
const char* const kVectorFiles[] = {
    "pyenv-3.9.18",
    "pyenv-3.10.13",
    "pyenv-3.11.7",
    "pyenv-3.11.7-no-debug-ranges",
    "pyenv-3.12.1",
    "pyenv-3.12.1-no-debug-ranges",
    "pyenv-3.13.0",
    "pyenv-3.13.0-no-debug-ranges",
    "debian-3.11.2",
    "debian-3.11.2-no-debug-ranges",
};

class InterpreterLineTables : public ::testing::TestWithParam<const char*> {
 protected:
  static nlohmann::json load(const std::string& name) {
    const fs::path path =
        fs::path(testing::source_dir()) / "tests/unit/data/line_tables" / (name + ".json");
    std::ifstream input(path);
    if (!input) throw std::runtime_error("cannot open " + path.string());
    return nlohmann::json::parse(input);
  }

  static PythonVersion version_of(const nlohmann::json& vectors) {
    PythonVersion version;
    const auto text = vectors.at("python").get<std::string>();
    if (std::sscanf(text.c_str(), "%d.%d.%d", &version.major, &version.minor, &version.micro) != 3) {
      throw std::runtime_error("bad version " + text);
    }
    return version;
  }

  static std::vector<uint8_t> table_bytes(const nlohmann::json& function) {
    const auto hex = function.at("table_hex").get<std::string>();
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
      bytes.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    }
    return bytes;
  }
};

TEST_P(InterpreterLineTables, DecoderAgreesWithTheInterpreterAtEveryCodeUnit) {
  const nlohmann::json vectors = load(GetParam());
  const auto format = line_table_format_for(version_of(vectors));
  ASSERT_TRUE(format.has_value());
  // The decoder takes the frame's own unit: bytes on 3.9, code units after.
  const uint32_t unit_scale = *format == LineTableFormat::kLnotab ? 2 : 1;

  size_t code_units_checked = 0;
  for (const auto& function : vectors.at("functions")) {
    const auto qualname = function.at("qualname").get<std::string>();
    const LineTable table =
        LineTable::decode(*format, table_bytes(function), function.at("first_line").get<int>());
    const auto& expected_lines = function.at("line_of_code_unit");
    std::vector<std::string> mismatches;
    for (uint32_t unit = 0; unit < expected_lines.size(); ++unit) {
      const int expected = expected_lines[unit].get<int>();
      const int decoded = table.line_for(unit * unit_scale);
      if (decoded != expected && mismatches.size() < 10) {
        mismatches.push_back("code unit " + std::to_string(unit) + ": decoded " +
                             std::to_string(decoded) + ", interpreter " + std::to_string(expected));
      }
    }
    code_units_checked += expected_lines.size();
    for (const auto& mismatch : mismatches) ADD_FAILURE() << qualname << ": " << mismatch;
  }
  EXPECT_GT(code_units_checked, 1000u);
  RecordProperty("code_units_checked", static_cast<int>(code_units_checked));
}

// At each probe() call the vectors hold the caller's frame position converted to the unit the
// frame struct stores, and the caller's f_lineno: the line a profiler must show for a frame
// blocked in a call.
TEST_P(InterpreterLineTables, DecoderGivesTheCallSiteLineOfAFrameInACall) {
  const nlohmann::json vectors = load(GetParam());
  const auto format = line_table_format_for(version_of(vectors));
  ASSERT_TRUE(format.has_value());
  const auto& functions = vectors.at("functions");
  const auto& call_sites = vectors.at("call_sites");
  ASSERT_GE(call_sites.size(), 20u);
  for (const auto& call_site : call_sites) {
    const auto& function = functions.at(call_site.at("function").get<size_t>());
    const auto instruction = call_site.at("instruction").get<uint32_t>();
    EXPECT_EQ(line_for_instruction(*format, table_bytes(function),
                                   function.at("first_line").get<int>(), instruction),
              call_site.at("line").get<int>())
        << function.at("qualname").get<std::string>() << " at instruction " << instruction;
  }
}

INSTANTIATE_TEST_SUITE_P(Vectors, InterpreterLineTables, ::testing::ValuesIn(kVectorFiles),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '.' || c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace tprof::symbolizer
