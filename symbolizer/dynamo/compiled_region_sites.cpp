#include "symbolizer/dynamo/compiled_region_sites.h"

#include <array>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/emulated_probe_point.h"
#include "symbolizer/binary/section_map.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

struct NamingFunction {
  std::string_view symbol;
  uint32_t name_argument;
  size_t name_register;  // x86_disassembler.h numbering
};

// In the order tried: where 2.6 hands the name over, then 2.14's caller of its local copy.
constexpr std::array<NamingFunction, 2> kNamingFunctions = {{
    {"_pytorch_record_function_enter", 1, kRdi},
    {"dynamo_eval_custom_code", 4, kRcx},
}};

}  // namespace

std::optional<CompiledRegionSite> find_compiled_region_site(const std::string& libtorch_python_path) {
  const ElfFile elf(libtorch_python_path);
  return find_compiled_region_site(LibraryIndex(elf));
}

std::optional<CompiledRegionSite> find_compiled_region_site(const LibraryIndex& libtorch_python) {
  const SectionMap& sections = libtorch_python.sections;
  for (const NamingFunction& naming : kNamingFunctions) {
    const DefinedSymbol* symbol = libtorch_python.symbols.find(naming.symbol);
    if (!symbol) continue;
    // Past the entry where the kernel emulates the probed instruction, the name still where
    // the caller put it: a single-stepped trap costs several emulated ones.
    const auto offset =
        sections.file_offset_of(emulated_entry_probe_address(sections, symbol->address, {naming.name_register}));
    if (!offset) continue;
    return CompiledRegionSite{*offset, naming.name_argument, std::string(naming.symbol)};
  }
  return std::nullopt;
}

}  // namespace tprof::symbolizer
