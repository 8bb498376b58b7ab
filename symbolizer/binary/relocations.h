// What the dynamic linker stores in a shared library's pointer slots (vtable and typeinfo
// entries, GOT slots): read from the dynamic relocations, since in a PIC library the file
// holds zeros (or only the addend) where those pointers go.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "symbolizer/binary/elf_file.h"

namespace tprof::symbolizer {

struct RelocatedPointer {
  // The symbol whose address the slot receives; empty for a R_X86_64_RELATIVE slot, which
  // points into this file without naming anything.
  std::string_view symbol;
  // The link-time address the slot points at when that lies in this file (a RELATIVE slot,
  // or a defined symbol, assuming no other module interposes it); nullopt for a symbol that
  // another library defines.
  std::optional<uint64_t> address;
};

class Relocations {
 public:
  // Reads every SHT_RELA section (.rela.dyn, .rela.plt); `elf` must outlive this.
  explicit Relocations(const ElfFile& elf);

  // What lands in the 8-byte slot at link-time address `slot`; nullopt when no relocation
  // of a kind understood here (RELATIVE, 64, GLOB_DAT, JUMP_SLOT) writes it.
  std::optional<RelocatedPointer> pointer_at(uint64_t slot) const;

 private:
  struct Slot {
    uint64_t address = 0;
    uint32_t type = 0;
    uint32_t symbol_index = 0;
    int64_t addend = 0;
  };
  struct Symbol {
    std::string_view name;
    uint64_t value = 0;
    bool defined = false;
  };

  std::vector<Slot> slots_;      // sorted by address
  std::vector<Symbol> symbols_;  // the dynamic symbol table, by index
};

}  // namespace tprof::symbolizer
