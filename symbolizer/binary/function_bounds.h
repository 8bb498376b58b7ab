// Where the function around an address starts and ends, for code that no symbol names (a
// library with only .dynsym has no symbol for its static functions): read from the unwind
// tables every x86-64 function has, .eh_frame_hdr's sorted table of FDEs and the FDEs'
// address ranges in .eh_frame.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

struct AddressRange {
  uint64_t start = 0;  // link-time address of the first byte
  uint64_t end = 0;    // one past the last byte
};

class FunctionBounds {
 public:
  // Throws std::runtime_error (one line) when the file has no .eh_frame_hdr, or one whose
  // search table is not encoded the way GNU ld writes it (4-byte signed, relative to the
  // section). `sections` must outlive this.
  FunctionBounds(const ElfFile& elf, const SectionMap& sections);

  // The range of the FDE covering `address`; nullopt when none does (PLT, padding) or its FDE
  // does not read as expected.
  std::optional<AddressRange> function_containing(uint64_t address) const;

 private:
  const SectionMap& sections_;
  uint64_t header_address_ = 0;  // where .eh_frame_hdr is; the table's values are relative to it
  std::string_view table_;       // (initial location, FDE address) pairs, 8 bytes each
};

}  // namespace tprof::symbolizer
