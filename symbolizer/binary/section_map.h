// Which of an ELF file's allocated sections holds a link-time address (an address in the
// file's own address space, st_value-like): where that byte sits in the file, and the bytes
// from there on.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "symbolizer/binary/elf_file.h"

namespace tprof::symbolizer {

class SectionMap {
 public:
  // Reads the section headers; `elf` must outlive the map.
  explicit SectionMap(const ElfFile& elf);

  // Where a uprobe at `address` goes: the address relative to its section, plus where that
  // section starts in the file (libbpf's elf_sym_offset does the same). nullopt when no
  // section stored in the file holds the address.
  std::optional<uint64_t> file_offset_of(uint64_t address) const;

  // The file's bytes from `address` to the end of its section; empty when no section stored
  // in the file holds the address.
  std::string_view bytes_at(uint64_t address) const;

  struct Section {
    uint64_t address = 0;
    uint64_t file_offset = 0;
    std::string_view bytes;
    bool executable = false;
  };
  // Allocated sections stored in the file, in header order.
  const std::vector<Section>& sections() const { return sections_; }

 private:
  const Section* section_holding(uint64_t address) const;

  std::vector<Section> sections_;
};

}  // namespace tprof::symbolizer
