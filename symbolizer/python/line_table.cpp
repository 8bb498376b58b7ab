#include "symbolizer/python/line_table.h"

#include <algorithm>
#include <iterator>
#include <limits>

namespace tprof::symbolizer {
namespace {

using Range = LineTable::Range;

// Appends [start, end) with `line`, growing the previous range instead when it continues it:
// location tables spend several entries on one line (one per expression), and fewer ranges
// make lookups cheaper.
void append_range(std::vector<Range>& ranges, uint32_t start, uint32_t end, int line) {
  if (end <= start) return;
  if (!ranges.empty() && ranges.back().end == start && ranges.back().line == line) {
    ranges.back().end = end;
    return;
  }
  ranges.push_back({start, end, line});
}

// 3.6-3.9 co_lnotab (Objects/lnotab_notes.txt): each pair first advances the byte offset, then
// the line, so a line holds from its pair's offset until the next non-zero advance. Like
// PyCode_Addr2Line, the last line extends past the table and there is no "no line" value.
std::vector<Range> decode_lnotab(std::span<const uint8_t> table, int first_line) {
  std::vector<Range> ranges;
  uint32_t offset = 0;
  int line = first_line;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    const uint8_t offset_delta = table[i];
    const auto line_delta = static_cast<int8_t>(table[i + 1]);
    append_range(ranges, offset, offset + offset_delta, line);
    offset += offset_delta;
    line += line_delta;
  }
  append_range(ranges, offset, std::numeric_limits<uint32_t>::max(), line);
  return ranges;
}

// 3.10 co_linetable (PEP 626, 3.10's Objects/lnotab_notes.txt): each pair is one range of
// `byte_delta` bytes whose line is the running line plus `line_delta`; -128 marks the range as
// having no line and leaves the running line alone. Long jumps are split into several pairs
// (byte deltas of 254 with line delta 0, line deltas of +-127 with byte delta 0).
std::vector<Range> decode_pep626(std::span<const uint8_t> table, int first_line) {
  constexpr int8_t kNoLine = -128;
  constexpr uint32_t kBytesPerCodeUnit = 2;
  std::vector<Range> ranges;
  uint32_t end_byte = 0;
  int running_line = first_line;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    const uint32_t start_byte = end_byte;
    end_byte += table[i];
    const auto line_delta = static_cast<int8_t>(table[i + 1]);
    int line = -1;
    if (line_delta != kNoLine) {
      running_line += line_delta;
      line = running_line;
    }
    append_range(ranges, start_byte / kBytesPerCodeUnit, end_byte / kBytesPerCodeUnit, line);
  }
  return ranges;
}

// Reads the location table's varints: 6 value bits per byte, least significant chunk first,
// bit 6 set on every byte but the last.
class VarintReader {
 public:
  VarintReader(std::span<const uint8_t> table, size_t position)
      : table_(table), position_(position) {}

  std::optional<uint32_t> read_unsigned() {
    uint32_t value = 0;
    for (unsigned shift = 0; shift < 32; shift += 6) {
      if (position_ >= table_.size()) return std::nullopt;
      const uint8_t byte = table_[position_++];
      value |= static_cast<uint32_t>(byte & 0x3f) << shift;
      if ((byte & 0x40) == 0) return value;
    }
    return std::nullopt;  // longer than any 32-bit value: not a table CPython wrote
  }

  // The sign is the lowest bit of the unsigned value (CPython scan_signed_varint).
  std::optional<int> read_signed() {
    const auto value = read_unsigned();
    if (!value) return std::nullopt;
    const auto magnitude = static_cast<int>(*value >> 1);
    return (*value & 1) ? -magnitude : magnitude;
  }

 private:
  std::span<const uint8_t> table_;
  size_t position_;
};

// 3.11+ co_linetable (PEP 657, Objects/locations.md). Each entry starts with a byte 1cccclll:
// it covers lll+1 code units, and its code cccc says how the line is stored:
//   0-9   short form, same line (one byte of columns follows);
//   10-12 one-line form, line delta = code - 10 (two column bytes follow);
//   13    no columns, signed varint line delta;
//   14    long form, signed varint line delta (then end line and columns);
//   15    no location: these units have no line, the running line is unchanged.
// Only the first byte of an entry has bit 7 set, which is how CPython skips payloads it does
// not need; this decoder does the same.
std::vector<Range> decode_locations(std::span<const uint8_t> table, int first_line) {
  enum : uint8_t { kOneLine0 = 10, kOneLine2 = 12, kNoColumns = 13, kLong = 14, kNone = 15 };
  std::vector<Range> ranges;
  uint32_t unit = 0;
  int running_line = first_line;
  size_t position = 0;
  while (position < table.size()) {
    const uint8_t header = table[position];
    if ((header & 0x80) == 0) break;  // not an entry start: the table is damaged
    const uint8_t code = (header >> 3) & 0x0f;
    const uint32_t length = (header & 0x07) + 1u;
    int line = -1;
    if (code == kLong || code == kNoColumns) {
      const auto line_delta = VarintReader(table, position + 1).read_signed();
      if (!line_delta) break;
      running_line += *line_delta;
      line = running_line;
    } else if (code >= kOneLine0 && code <= kOneLine2) {
      running_line += code - kOneLine0;
      line = running_line;
    } else if (code != kNone) {
      line = running_line;
    }
    append_range(ranges, unit, unit + length, line);
    unit += length;
    do {
      ++position;
    } while (position < table.size() && (table[position] & 0x80) == 0);
  }
  return ranges;
}

}  // namespace

std::optional<LineTableFormat> line_table_format_for(const PythonVersion& version) {
  if (version.major != 3 || version.minor < 6) return std::nullopt;
  if (version.minor <= 9) return LineTableFormat::kLnotab;
  if (version.minor == 10) return LineTableFormat::kPep626Linetable;
  return LineTableFormat::kLocationTable;
}

LineTable LineTable::decode(LineTableFormat format, std::span<const uint8_t> table,
                            int first_line) {
  switch (format) {
    case LineTableFormat::kLnotab:
      return LineTable(decode_lnotab(table, first_line));
    case LineTableFormat::kPep626Linetable:
      return LineTable(decode_pep626(table, first_line));
    case LineTableFormat::kLocationTable:
      return LineTable(decode_locations(table, first_line));
  }
  return {};
}

int LineTable::line_for(uint32_t instruction) const {
  // The first range starting after `instruction`; the one before it is the only candidate.
  const auto after = std::upper_bound(
      ranges_.begin(), ranges_.end(), instruction,
      [](uint32_t wanted, const Range& range) { return wanted < range.start; });
  if (after == ranges_.begin()) return -1;
  const Range& candidate = *std::prev(after);
  return instruction < candidate.end ? candidate.line : -1;
}

int line_for_instruction(LineTableFormat format, std::span<const uint8_t> table, int first_line,
                         uint32_t instruction) {
  return LineTable::decode(format, table, first_line).line_for(instruction);
}

}  // namespace tprof::symbolizer
