#include "symbolizer/binary/defined_symbols.h"

#include <algorithm>
#include <unordered_set>

namespace tprof::symbolizer {
namespace {

bool by_address(const DefinedSymbol& a, const DefinedSymbol& b) { return a.address < b.address; }

}  // namespace

DefinedSymbols::DefinedSymbols(const ElfFile& elf) {
  std::unordered_set<std::string_view> seen;
  elf.for_each_section([&](const ElfSection& table) {
    if (table.header.sh_type != SHT_SYMTAB && table.header.sh_type != SHT_DYNSYM) return;
    elf.for_each_symbol(table, [&](const ElfSymbol& entry) {
      const GElf_Sym& symbol = entry.symbol;
      const unsigned type = GELF_ST_TYPE(symbol.st_info);
      if (type != STT_FUNC && type != STT_OBJECT) return;
      // Undefined symbols name other files' definitions; reserved indexes (SHN_ABS, ...) no
      // section of this one.
      if (symbol.st_shndx == SHN_UNDEF || symbol.st_shndx >= SHN_LORESERVE) return;
      if (entry.name.empty() || !seen.insert(entry.name).second) return;
      (type == STT_FUNC ? functions_ : objects_)
          .push_back({entry.name, symbol.st_value, symbol.st_size});
    });
  });
  std::sort(functions_.begin(), functions_.end(), by_address);
  std::sort(objects_.begin(), objects_.end(), by_address);
  for (size_t index = 0; index < functions_.size(); ++index) {
    by_name_.emplace(functions_[index].name, std::pair{true, index});
  }
  for (size_t index = 0; index < objects_.size(); ++index) {
    by_name_.emplace(objects_[index].name, std::pair{false, index});
  }
}

const DefinedSymbol* DefinedSymbols::find(std::string_view mangled_name) const {
  auto found = by_name_.find(mangled_name);
  if (found == by_name_.end()) return nullptr;
  const auto [is_function, index] = found->second;
  return is_function ? &functions_[index] : &objects_[index];
}

const DefinedSymbol* DefinedSymbols::find_first(
    std::span<const std::string_view> mangled_names) const {
  for (std::string_view name : mangled_names) {
    if (const DefinedSymbol* symbol = find(name)) return symbol;
  }
  return nullptr;
}

const DefinedSymbol* DefinedSymbols::function_containing(uint64_t address) const {
  return symbol_containing(functions_, address);
}

const DefinedSymbol* DefinedSymbols::object_containing(uint64_t address) const {
  return symbol_containing(objects_, address);
}

uint64_t probe_offset(const DefinedSymbol* symbol, const SectionMap& sections) {
  if (symbol == nullptr) return 0;
  return sections.file_offset_of(symbol->address).value_or(0);
}

}  // namespace tprof::symbolizer
