#include "symbolizer/binary/relocations.h"

#include <elf.h>

#include <algorithm>
#include <cstring>

namespace tprof::symbolizer {

Relocations::Relocations(const ElfFile& elf) {
  size_t symbol_table_index = 0;
  elf.for_each_section([&](const ElfSection& section) {
    const GElf_Shdr& header = section.header;
    if (header.sh_type != SHT_RELA || header.sh_entsize != sizeof(Elf64_Rela)) return;
    symbol_table_index = header.sh_link;
    const std::string_view bytes = elf.section_bytes(section);
    for (size_t at = 0; at + sizeof(Elf64_Rela) <= bytes.size(); at += sizeof(Elf64_Rela)) {
      Elf64_Rela relocation;
      std::memcpy(&relocation, bytes.data() + at, sizeof(relocation));
      slots_.push_back(Slot{
          .address = relocation.r_offset,
          .type = static_cast<uint32_t>(ELF64_R_TYPE(relocation.r_info)),
          .symbol_index = static_cast<uint32_t>(ELF64_R_SYM(relocation.r_info)),
          .addend = relocation.r_addend,
      });
    }
  });
  // A shared library's dynamic relocations all refer to .dynsym.
  if (symbol_table_index != 0) {
    elf.for_each_symbol(elf.section_at(symbol_table_index), [&](const ElfSymbol& entry) {
      symbols_.push_back(Symbol{
          .name = entry.name,
          .value = entry.symbol.st_value,
          .defined = entry.symbol.st_shndx != SHN_UNDEF,
      });
    });
  }
  std::sort(slots_.begin(), slots_.end(),
            [](const Slot& a, const Slot& b) { return a.address < b.address; });
}

std::optional<RelocatedPointer> Relocations::pointer_at(uint64_t slot_address) const {
  auto slot =
      std::lower_bound(slots_.begin(), slots_.end(), slot_address,
                       [](const Slot& entry, uint64_t value) { return entry.address < value; });
  if (slot == slots_.end() || slot->address != slot_address) return std::nullopt;
  if (slot->type == R_X86_64_RELATIVE) {  // B + A
    return RelocatedPointer{.symbol = {}, .address = static_cast<uint64_t>(slot->addend)};
  }
  if (slot->symbol_index >= symbols_.size()) return std::nullopt;
  const Symbol& symbol = symbols_[slot->symbol_index];
  RelocatedPointer pointer{.symbol = symbol.name, .address = std::nullopt};
  switch (slot->type) {
    case R_X86_64_64:  // S + A
      if (symbol.defined) pointer.address = symbol.value + static_cast<uint64_t>(slot->addend);
      return pointer;
    case R_X86_64_GLOB_DAT:   // S
    case R_X86_64_JUMP_SLOT:  // S
      if (symbol.defined) pointer.address = symbol.value;
      return pointer;
    default:
      return std::nullopt;
  }
}

}  // namespace tprof::symbolizer
