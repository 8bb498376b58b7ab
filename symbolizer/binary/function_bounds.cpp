#include "symbolizer/binary/function_bounds.h"

#include <cstring>
#include <stdexcept>

namespace tprof::symbolizer {
namespace {

// DWARF pointer encodings (LSB Core, .eh_frame_hdr).
constexpr uint8_t kEncodingUdata4 = 0x03;
constexpr uint8_t kEncodingSdata4 = 0x0b;
constexpr uint8_t kEncodingFormatMask = 0x0f;
constexpr uint8_t kEncodingDataRelative = 0x30;

// version, eh_frame_ptr_enc, fde_count_enc, table_enc; then eh_frame_ptr and fde_count
// (4 bytes each in the encodings accepted here), then the table.
constexpr size_t kHeaderSize = 4 + 4 + 4;
constexpr size_t kTableEntrySize = 8;

int32_t read_int32(std::string_view bytes, size_t at) {
  int32_t value = 0;
  std::memcpy(&value, bytes.data() + at, sizeof(value));
  return value;
}

uint32_t read_uint32(std::string_view bytes, size_t at) {
  uint32_t value = 0;
  std::memcpy(&value, bytes.data() + at, sizeof(value));
  return value;
}

}  // namespace

FunctionBounds::FunctionBounds(const ElfFile& elf, const SectionMap& sections)
    : sections_(sections) {
  std::string_view header;
  elf.for_each_section([&](const ElfSection& section) {
    if (section.name != ".eh_frame_hdr") return;
    header = elf.section_bytes(section);
    header_address_ = section.header.sh_addr;
  });
  if (header.size() < kHeaderSize) {
    throw std::runtime_error(elf.path() + " has no readable .eh_frame_hdr");
  }
  const auto encoding = [&](size_t at) { return static_cast<uint8_t>(header[at]); };
  // eh_frame_ptr is not used, but its size says where fde_count is.
  if (encoding(0) != 1 || (encoding(1) & kEncodingFormatMask) != kEncodingSdata4 ||
      encoding(2) != kEncodingUdata4 || encoding(3) != (kEncodingDataRelative | kEncodingSdata4)) {
    throw std::runtime_error(elf.path() + ": .eh_frame_hdr has an encoding not read here");
  }
  const uint64_t entries = read_uint32(header, 8);
  if (kHeaderSize + entries * kTableEntrySize > header.size()) {
    throw std::runtime_error(elf.path() + ": .eh_frame_hdr's table runs past its end");
  }
  table_ = header.substr(kHeaderSize, entries * kTableEntrySize);
}

std::optional<AddressRange> FunctionBounds::function_containing(uint64_t address) const {
  // The table is sorted by initial location: find the last FDE starting at or before address.
  size_t low = 0, high = table_.size() / kTableEntrySize;
  const auto start_of = [&](size_t entry) {
    return header_address_ + read_int32(table_, entry * kTableEntrySize);
  };
  while (low < high) {
    const size_t middle = low + (high - low) / 2;
    if (start_of(middle) <= address) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  if (low == 0) return std::nullopt;
  const size_t entry = low - 1;
  const uint64_t start = start_of(entry);
  const uint64_t fde_address = header_address_ + read_int32(table_, entry * kTableEntrySize + 4);

  // An FDE: length (4), CIE pointer (4), pc_begin, pc_range. The CIE's augmentation says how
  // pc_begin is encoded; rather than parse it, accept the encoding GCC and clang emit
  // (4-byte PC-relative, so pc_range is 4 bytes too) only when pc_begin, read that way, is the
  // start the table gives. A 64-bit-length FDE (length 0xffffffff) fails that check too.
  const std::string_view fde = sections_.bytes_at(fde_address);
  constexpr size_t kPcBegin = 8, kPcRange = 12, kMinimumSize = 16;
  if (fde.size() < kMinimumSize) return std::nullopt;
  if (fde_address + kPcBegin + read_int32(fde, kPcBegin) != start) return std::nullopt;
  const uint64_t end = start + read_uint32(fde, kPcRange);
  if (address >= end) return std::nullopt;
  return AddressRange{start, end};
}

}  // namespace tprof::symbolizer
