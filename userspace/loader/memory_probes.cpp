#include "userspace/loader/memory_probes.h"

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/emulated_probe_point.h"
#include "symbolizer/binary/section_map.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof {
namespace {

constexpr const char* kLibc10 = "libc10.so";
// c10::ProfiledCPUMemoryReporter::New(void*, unsigned long) and ::Delete(void*).
constexpr const char* kNew = "_ZN3c1025ProfiledCPUMemoryReporter3NewEPvm";
constexpr const char* kDelete = "_ZN3c1025ProfiledCPUMemoryReporter6DeleteEPv";

// The file offset to probe `name` at; 0 when it is not exported.
uint64_t probe_site(const symbolizer::DefinedSymbols& symbols, const symbolizer::SectionMap& sections,
                    const char* name, std::initializer_list<size_t> arguments) {
  const symbolizer::DefinedSymbol* symbol = symbols.find(name);
  if (symbol == nullptr) return 0;
  symbolizer::DefinedSymbol probed = *symbol;
  probed.address = symbolizer::emulated_entry_probe_address(sections, symbol->address, arguments);
  return symbolizer::probe_offset(&probed, sections);
}

}  // namespace

std::optional<MemoryProbes> plan_memory_probes(const TargetProcess& target, std::string* why) {
  const auto library = target.find_mapped_library(kLibc10);
  if (!library) {
    *why = "the target has not loaded libc10";
    return std::nullopt;
  }
  const symbolizer::ElfFile elf(library->host_path);
  const symbolizer::SectionMap sections(elf);
  const symbolizer::DefinedSymbols symbols(elf);
  // New reads the block and its size, Delete the block (this is rdi in both).
  const uint64_t allocation = probe_site(symbols, sections, kNew, {symbolizer::kRsi, symbolizer::kRdx});
  const uint64_t free = probe_site(symbols, sections, kDelete, {symbolizer::kRsi});
  if (allocation == 0 || free == 0) {
    *why = library->path_in_target + " does not export c10::ProfiledCPUMemoryReporter::New and ::Delete";
    return std::nullopt;
  }
  return MemoryProbes{.allocations = {.binary_path = library->host_path, .offsets = {allocation}, .cookies = {0}},
                      .frees = {.binary_path = library->host_path, .offsets = {free}, .cookies = {0}},
                      .library = library->path_in_target};
}

}  // namespace tprof
