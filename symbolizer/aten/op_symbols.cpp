#include "symbolizer/aten/op_symbols.h"

#include <algorithm>
#include <charconv>
#include <unordered_set>

#include "symbolizer/aten/identifier_chars.h"

namespace tprof::symbolizer {
namespace {

// Itanium mangling of the nested name at::_ops::<length><op>::call: "2at" "4_ops" <op> "4call",
// closed by the "E" that ends the nested name (the parameter types follow).
constexpr std::string_view kOpsNamespacePrefix = "_ZN2at4_ops";
constexpr std::string_view kCallSuffix = "4callE";

bool is_defined_function(const GElf_Sym& symbol) {
  return GELF_ST_TYPE(symbol.st_info) == STT_FUNC && symbol.st_shndx != SHN_UNDEF &&
         symbol.st_value != 0;
}

}  // namespace

std::optional<std::string_view> op_name_of_call_symbol(std::string_view mangled) {
  if (!mangled.starts_with(kOpsNamespacePrefix)) return std::nullopt;
  std::string_view rest = mangled.substr(kOpsNamespacePrefix.size());
  if (rest.empty() || rest.front() == '0') return std::nullopt;  // lengths have no leading zero
  size_t length = 0;
  auto [digits_end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), length);
  if (error != std::errc{}) return std::nullopt;
  rest.remove_prefix(digits_end - rest.data());
  if (length == 0 || length > rest.size()) return std::nullopt;
  std::string_view op = rest.substr(0, length);
  if (!std::all_of(op.begin(), op.end(), is_identifier_char)) return std::nullopt;
  if (!rest.substr(length).starts_with(kCallSuffix)) return std::nullopt;
  return op;
}

std::vector<OpCallSite> find_op_call_sites(const ElfFile& elf) {
  std::vector<OpCallSite> sites;
  std::unordered_set<std::string_view> seen_symbols;
  elf.for_each_section([&](const ElfSection& table) {
    if (table.header.sh_type != SHT_SYMTAB && table.header.sh_type != SHT_DYNSYM) return;
    elf.for_each_symbol(table, [&](const ElfSymbol& entry) {
      if (!is_defined_function(entry.symbol)) return;
      // Reserved indexes (SHN_ABS, SHN_XINDEX, ...) name no section to translate the address
      // through; ATen's call functions always live in an ordinary code section.
      if (entry.symbol.st_shndx >= SHN_LORESERVE) return;
      std::optional<std::string_view> op = op_name_of_call_symbol(entry.name);
      if (!op || !seen_symbols.insert(entry.name).second) return;
      // Where the code sits in the file, which is what a uprobe is attached by: the address
      // relative to its section, plus where that section starts in the file (libbpf's
      // elf_sym_offset does the same).
      const GElf_Shdr& section = elf.section_at(entry.symbol.st_shndx).header;
      sites.push_back(OpCallSite{
          .unambiguous_name = std::string(*op),
          .mangled_symbol = std::string(entry.name),
          .symbol_address = entry.symbol.st_value,
          .file_offset = entry.symbol.st_value - section.sh_addr + section.sh_offset,
      });
    });
  });
  std::sort(sites.begin(), sites.end(), [](const OpCallSite& a, const OpCallSite& b) {
    return a.unambiguous_name < b.unambiguous_name;
  });
  return sites;
}

}  // namespace tprof::symbolizer
