// The functions and objects an ELF file defines, by mangled name and by address: what the
// code-reading symbolizers start from when a library has only .dynsym.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

struct DefinedSymbol {
  std::string_view name;  // mangled; points into the symbol table's string table
  uint64_t address = 0;   // st_value: a link-time address
  uint64_t size = 0;      // st_size
};

class DefinedSymbols {
 public:
  // Every defined STT_FUNC and STT_OBJECT symbol of .dynsym and .symtab, each name once (a
  // symbol listed in both tables is the same definition). `elf` must outlive this.
  explicit DefinedSymbols(const ElfFile& elf);

  // nullptr when the file defines no function or object of that name.
  const DefinedSymbol* find(std::string_view mangled_name) const;

  // The first of `mangled_names` the file defines; nullptr when it defines none. For a
  // constructor's C1 (complete object) and C2 (base object) names: GCC emits one body under
  // both, but either may be the only one exported.
  const DefinedSymbol* find_first(std::span<const std::string_view> mangled_names) const;

  // The function (object) whose bytes [address, address + size) include `address`; nullptr
  // when none does.
  const DefinedSymbol* function_containing(uint64_t address) const;
  const DefinedSymbol* object_containing(uint64_t address) const;

  const std::vector<DefinedSymbol>& functions() const { return functions_; }  // by address
  const std::vector<DefinedSymbol>& objects() const { return objects_; }      // by address

 private:
  std::vector<DefinedSymbol> functions_;
  std::vector<DefinedSymbol> objects_;
  // Positions rather than pointers, so that copies stay valid: (is a function, index).
  std::unordered_map<std::string_view, std::pair<bool, size_t>> by_name_;
};

// Among `sorted` (symbols of one kind, by address; anything with an address and a size), the
// one whose bytes include `address`; nullptr when none does. Symbols of one kind do not overlap,
// except aliases (C1/C2 constructors, identical code folded together), which share their start:
// among the symbols starting at the greatest address not above `address`, the one long enough
// to reach it.
template <typename Symbol>
const Symbol* symbol_containing(const std::vector<Symbol>& sorted, uint64_t address) {
  auto after = std::upper_bound(sorted.begin(), sorted.end(), address,
                                [](uint64_t value, const Symbol& symbol) { return value < symbol.address; });
  if (after == sorted.begin()) return nullptr;
  const uint64_t start = std::prev(after)->address;
  for (auto candidate = std::prev(after); candidate->address == start; --candidate) {
    if (address - start < candidate->size) return &*candidate;
    if (candidate == sorted.begin()) break;
  }
  return nullptr;
}

// Where a uprobe on `symbol` goes (SectionMap::file_offset_of); 0, which the probe-site
// structs read as "not exported", when `symbol` is nullptr or lies in no section stored in the
// file.
uint64_t probe_offset(const DefinedSymbol* symbol, const SectionMap& sections);

}  // namespace tprof::symbolizer
