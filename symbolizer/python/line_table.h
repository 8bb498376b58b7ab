// Decoders for the three formats CPython has used to map bytecode to source lines. Pure
// functions over bytes already copied out of the target: no I/O, no CPython headers.
//
// Units. `instruction` is in whatever unit the frame struct records for that version, so a
// stack walker passes what it read without converting:
//   kLnotab         (3.6-3.9): a byte offset into co_code (PyFrameObject.f_lasti).
//   kPep626Linetable (3.10):   an index of 2-byte code units (PyFrameObject.f_lasti).
//   kLocationTable  (3.11+):   an index of 2-byte code units into co_code_adaptive, i.e.
//                              (prev_instr or instr_ptr - (code + co_code_adaptive)) / 2.
// Those pointers name the CALL while the frame is blocked in a call (3.11/3.12 prev_instr is
// the last instruction started, 3.13+ instr_ptr the current one), so the line is the call site.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "symbolizer/python/python_layout.h"

namespace tprof::symbolizer {

enum class LineTableFormat {
  kLnotab,            // co_lnotab: (addr_delta:u8, line_delta:s8) pairs; Objects/lnotab_notes.txt (3.9)
  kPep626Linetable,   // co_linetable: (byte_delta:u8, line_delta:s8), -128 = no line (3.10)
  kLocationTable,     // co_linetable: PEP 657 location entries; Objects/locations.md (3.11+)
};

// The format a CPython version's code objects carry; nullopt before 3.6, whose co_lnotab
// line deltas were unsigned.
std::optional<LineTableFormat> line_table_format_for(const PythonVersion& version);

// A decoded table: sorted, non-overlapping instruction ranges, each with its line. Decoding
// once per code object makes each later lookup a binary search.
class LineTable {
 public:
  struct Range {
    uint32_t start = 0;  // first instruction of the range
    uint32_t end = 0;    // one past the last
    int line = -1;
  };

  LineTable() = default;

  // Never fails: a table cut short or corrupted in the target decodes to the ranges before the
  // damage, so lookups past it give -1.
  static LineTable decode(LineTableFormat format, std::span<const uint8_t> table, int first_line);

  // The line of `instruction` (units above), or -1 when the table gives it none (3.10+: code
  // the compiler marked as having no line, or an offset past the end of the table).
  int line_for(uint32_t instruction) const;

 private:
  explicit LineTable(std::vector<Range> ranges) : ranges_(std::move(ranges)) {}

  std::vector<Range> ranges_;
};

// One-shot form of LineTable::decode(...).line_for(instruction).
int line_for_instruction(LineTableFormat format, std::span<const uint8_t> table, int first_line,
                         uint32_t instruction);

}  // namespace tprof::symbolizer
