#include "symbolizer/python/code_object_reader.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <utility>
#include <vector>

namespace tprof::symbolizer {
namespace {

// Bounds on what a real code object holds, so a garbage pointer that passed the type check
// cannot make us copy gigabytes. Paths and identifiers are far shorter; line tables of
// machine-generated functions reach hundreds of KiB.
constexpr int64_t kMaxStringLength = 1 << 16;  // code points
constexpr int64_t kMaxLineTableSize = 1 << 22;  // bytes

// PyASCIIObject.state bitfield (Include/cpython/unicodeobject.h, the same bits 3.9-3.14 in
// default builds): interned:2, kind:3, compact:1, ascii:1.
constexpr uint32_t kStateKindShift = 2;
constexpr uint32_t kStateKindMask = 0x7;
constexpr uint32_t kStateCompact = 1u << 5;
constexpr uint32_t kStateAscii = 1u << 6;

// A block copied out of the target, read field by field at struct offsets.
class RemoteBlock {
 public:
  RemoteBlock(const ReadMemory& read, uint64_t address, size_t size) : bytes_(size) {
    readable_ = read(address, bytes_.data(), size);
  }

  bool readable() const { return readable_; }

  template <typename T>
  T field(size_t offset) const {
    T value;
    std::memcpy(&value, bytes_.data() + offset, sizeof(value));
    return value;
  }

 private:
  std::vector<uint8_t> bytes_;
  bool readable_ = false;
};

void append_utf8(std::string& out, uint32_t code_point) {
  constexpr uint32_t kReplacementCharacter = 0xfffd;
  // Python strings may hold lone surrogates and a corrupt one anything; neither is UTF-8.
  if ((code_point >= 0xd800 && code_point <= 0xdfff) || code_point > 0x10ffff) {
    code_point = kReplacementCharacter;
  }
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xc0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xe0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code_point & 0x3f));
  }
}

// Code points stored `kind` bytes each (1 Latin-1, 2 UCS-2, 4 UCS-4), as UTF-8.
std::string utf8_from_code_units(const std::vector<uint8_t>& data, uint32_t kind) {
  std::string text;
  text.reserve(data.size());
  for (size_t offset = 0; offset + kind <= data.size(); offset += kind) {
    uint32_t code_point = 0;
    if (kind == 1) {
      code_point = data[offset];
    } else if (kind == 2) {
      uint16_t unit;
      std::memcpy(&unit, data.data() + offset, sizeof(unit));
      code_point = unit;
    } else {
      std::memcpy(&code_point, data.data() + offset, sizeof(code_point));
    }
    append_utf8(text, code_point);
  }
  return text;
}

// A str object as UTF-8 (runtime-layouts.md §2.5). Only compact strings are read: code object
// names and paths are always compact, and the legacy form keeps its data elsewhere.
std::optional<std::string> read_unicode(const PythonLayout& layout, const ReadMemory& read,
                                        uint64_t address) {
  if (address == 0) return std::nullopt;
  const size_t header_size = std::max<size_t>(layout.unicode_length + sizeof(int64_t),
                                              layout.unicode_state + sizeof(uint32_t));
  const RemoteBlock header(read, address, header_size);
  if (!header.readable()) return std::nullopt;
  const auto length = header.field<int64_t>(layout.unicode_length);
  const auto state = header.field<uint32_t>(layout.unicode_state);
  const uint32_t kind = (state >> kStateKindShift) & kStateKindMask;
  if (length < 0 || length > kMaxStringLength || (state & kStateCompact) == 0) return std::nullopt;
  if (kind != 1 && kind != 2 && kind != 4) return std::nullopt;

  const bool ascii = (state & kStateAscii) != 0;
  if (ascii && kind != 1) return std::nullopt;
  // ASCII data follows the smaller PyASCIIObject header; other compact strings follow
  // PyCompactUnicodeObject, which adds the cached UTF-8 pointer and length.
  const uint64_t data_address =
      address + (ascii ? layout.unicode_ascii_data : layout.unicode_compact_data);
  std::vector<uint8_t> data(static_cast<size_t>(length) * kind);
  if (!data.empty() && !read(data_address, data.data(), data.size())) return std::nullopt;
  if (ascii) {
    if (std::any_of(data.begin(), data.end(), [](uint8_t byte) { return byte >= 0x80; })) {
      return std::nullopt;
    }
    return std::string(data.begin(), data.end());
  }
  return utf8_from_code_units(data, kind);
}

// A bytes object's contents: the line table.
std::optional<std::vector<uint8_t>> read_bytes(const PythonLayout& layout, const ReadMemory& read,
                                               uint64_t address) {
  if (address == 0) return std::nullopt;
  const RemoteBlock header(read, address, layout.bytes_size + sizeof(int64_t));
  if (!header.readable()) return std::nullopt;
  const auto size = header.field<int64_t>(layout.bytes_size);
  if (size < 0 || size > kMaxLineTableSize) return std::nullopt;
  std::vector<uint8_t> data(static_cast<size_t>(size));
  if (!data.empty() && !read(address + layout.bytes_data, data.data(), data.size())) {
    return std::nullopt;
  }
  return data;
}

// The code's bytecode: co_code's bytes (3.9/3.10), or the code units inline at
// co_code_adaptive, as many as the code object's ob_size (3.11+).
std::optional<std::vector<uint8_t>> read_bytecode(const PythonLayout& layout, const ReadMemory& read,
                                                  uint64_t code_address, const RemoteBlock& code) {
  if (layout.code_code >= 0) return read_bytes(layout, read, code.field<uint64_t>(static_cast<uint32_t>(layout.code_code)));
  if (layout.code_adaptive < 0) return std::nullopt;
  const auto units = code.field<int64_t>(layout.bytes_size);  // PyVarObject's ob_size, as a bytes object's
  if (units <= 0 || units * 2 > kMaxLineTableSize) return std::nullopt;
  std::vector<uint8_t> bytecode(static_cast<size_t>(units) * 2);
  if (!read(code_address + static_cast<uint32_t>(layout.code_adaptive), bytecode.data(), bytecode.size()))
    return std::nullopt;
  return bytecode;
}

}  // namespace

int line(const CodeInfo& code, uint32_t instruction) { return code.lines.line_for(instruction); }

std::optional<CodeInfo> read_code_object(const PythonLayout& layout, const ReadMemory& read,
                                         uint64_t code_address) {
  const auto format = line_table_format_for(layout.version);
  if (!format || layout.code_type_address == 0) return std::nullopt;

  // Every field this reads lies in the fixed part of PyCodeObject: one copy covers them all.
  const bool has_qualname = layout.code_qualname >= 0;
  const auto qualname_offset = static_cast<uint32_t>(has_qualname ? layout.code_qualname : 0);
  const size_t header_size =
      std::max({layout.object_type, layout.code_filename, layout.code_name, qualname_offset, layout.code_linetable,
                layout.bytes_size, static_cast<uint32_t>(std::max(layout.code_code, 0))}) +
      sizeof(uint64_t);
  const RemoteBlock code(read, code_address,
                         std::max<size_t>(header_size, layout.code_firstlineno + sizeof(int32_t)));
  if (!code.readable() || code.field<uint64_t>(layout.object_type) != layout.code_type_address) {
    return std::nullopt;
  }

  auto filename = read_unicode(layout, read, code.field<uint64_t>(layout.code_filename));
  auto name = read_unicode(layout, read, code.field<uint64_t>(layout.code_name));
  if (!filename || !name) return std::nullopt;
  auto qualname = has_qualname ? read_unicode(layout, read, code.field<uint64_t>(qualname_offset))
                               : name;
  if (!qualname) return std::nullopt;
  const auto table = read_bytes(layout, read, code.field<uint64_t>(layout.code_linetable));
  if (!table) return std::nullopt;

  const auto first_line = code.field<int32_t>(layout.code_firstlineno);
  const auto bytecode = read_bytecode(layout, read, code_address, code);
  return CodeInfo{
      .filename = std::move(*filename),
      .qualname = std::move(*qualname),
      .name = std::move(*name),
      .first_line = first_line,
      .lines = LineTable::decode(*format, *table, first_line),
      .loops = bytecode ? backward_jumps(layout.version, *bytecode) : std::nullopt,
  };
}

const CodeInfo* CodeObjectCache::lookup(uint64_t code_address, bool* read_now) {
  auto [entry, inserted] = entries_.try_emplace(code_address);
  if (inserted) entry->second = read_code_object(layout_, read_, code_address);
  if (read_now) *read_now = inserted;
  return entry->second ? &*entry->second : nullptr;
}

namespace {

// A tuple of str, each as UTF-8; nullopt if any of it cannot be read, or `expected_size` is given
// and differs.
std::optional<std::vector<std::string>> read_names(const PythonLayout& layout, const ReadMemory& read,
                                                   uint64_t tuple, std::optional<size_t> expected_size = {}) {
  constexpr int64_t kMaxNames = 1 << 16;
  int64_t size = -1;
  if (tuple == 0 || !read(tuple + layout.tuple_size, &size, sizeof(size)) || size < 0 || size > kMaxNames ||
      (expected_size && static_cast<size_t>(size) != *expected_size))
    return std::nullopt;
  std::vector<uint64_t> items(static_cast<size_t>(size));
  if (!items.empty() && !read(tuple + layout.tuple_items, items.data(), items.size() * sizeof(uint64_t)))
    return std::nullopt;
  std::vector<std::string> names;
  for (const uint64_t item : items) {
    auto name = read_unicode(layout, read, item);
    if (!name) return std::nullopt;
    names.push_back(std::move(*name));
  }
  return names;
}

// 3.11+: co_localsplusnames, and their kinds in co_localspluskinds.
std::optional<FrameSlots> read_localsplus(const PythonLayout& layout, const ReadMemory& read, uint64_t code_address) {
  const auto names_offset = static_cast<uint32_t>(layout.code_localsplusnames);
  const auto kinds_offset = static_cast<uint32_t>(layout.code_localspluskinds);
  const RemoteBlock code(read, code_address, std::max(names_offset, kinds_offset) + sizeof(uint64_t));
  if (!code.readable()) return std::nullopt;
  auto kinds = read_bytes(layout, read, code.field<uint64_t>(kinds_offset));
  if (!kinds) return std::nullopt;
  auto names = read_names(layout, read, code.field<uint64_t>(names_offset), kinds->size());
  if (!names) return std::nullopt;
  return FrameSlots{.names = std::move(*names), .kinds = std::move(*kinds)};
}

// 3.9/3.10: f_localsplus holds co_varnames' locals, then co_cellvars' cells, then co_freevars'.
std::optional<FrameSlots> read_separate_slot_names(const PythonLayout& layout, const ReadMemory& read,
                                                   uint64_t code_address) {
  constexpr uint8_t kLocal = 0x20, kFree = 0x80;  // CO_FAST_LOCAL, CO_FAST_FREE
  const auto offsets = {layout.code_varnames, layout.code_cellvars, layout.code_freevars};
  const RemoteBlock code(read, code_address, static_cast<uint32_t>(std::max(offsets)) + sizeof(uint64_t));
  if (!code.readable()) return std::nullopt;
  FrameSlots slots;
  for (const auto& [offset, kind] : {std::pair{layout.code_varnames, kLocal}, std::pair{layout.code_cellvars, kSlotIsCell},
                                     std::pair{layout.code_freevars, kFree}}) {
    auto names = read_names(layout, read, code.field<uint64_t>(static_cast<uint32_t>(offset)));
    if (!names) return std::nullopt;
    slots.kinds.insert(slots.kinds.end(), names->size(), kind);
    slots.names.insert(slots.names.end(), std::make_move_iterator(names->begin()),
                       std::make_move_iterator(names->end()));
  }
  return slots;
}

}  // namespace

std::optional<FrameSlots> read_frame_slots(const PythonLayout& layout, const ReadMemory& read, uint64_t code_address) {
  if (layout.code_localsplusnames >= 0 && layout.code_localspluskinds >= 0)
    return read_localsplus(layout, read, code_address);
  if (layout.code_varnames >= 0 && layout.code_cellvars >= 0 && layout.code_freevars >= 0)
    return read_separate_slot_names(layout, read, code_address);
  return std::nullopt;
}

}  // namespace tprof::symbolizer
