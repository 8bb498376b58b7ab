#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

SectionMap::SectionMap(const ElfFile& elf) {
  elf.for_each_section([&](const ElfSection& section) {
    const GElf_Shdr& header = section.header;
    // SHT_NOBITS (.bss) occupies addresses but no bytes of the file: nothing to read or probe.
    if ((header.sh_flags & SHF_ALLOC) == 0 || header.sh_type == SHT_NOBITS) return;
    sections_.push_back(Section{
        .address = header.sh_addr,
        .file_offset = header.sh_offset,
        .bytes = elf.section_bytes(section),
        .executable = (header.sh_flags & SHF_EXECINSTR) != 0,
    });
  });
}

const SectionMap::Section* SectionMap::section_holding(uint64_t address) const {
  for (const Section& section : sections_) {
    if (address >= section.address && address - section.address < section.bytes.size()) {
      return &section;
    }
  }
  return nullptr;
}

std::optional<uint64_t> SectionMap::file_offset_of(uint64_t address) const {
  const Section* section = section_holding(address);
  if (section == nullptr) return std::nullopt;
  return address - section->address + section->file_offset;
}

std::string_view SectionMap::bytes_at(uint64_t address) const {
  const Section* section = section_holding(address);
  if (section == nullptr) return {};
  return section->bytes.substr(address - section->address);
}

}  // namespace tprof::symbolizer
