#include "userspace/loader/memory_probes.h"

#include <initializer_list>

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
// c10::reportMemoryUsageToProfiler(void*, long, long, long, c10::Device) in torch 1.13; its
// totals became size_t in 2.x.
constexpr const char* kReportNames[] = {"_ZN3c1027reportMemoryUsageToProfilerEPvlmmNS_6DeviceE",
                                        "_ZN3c1027reportMemoryUsageToProfilerEPvlllNS_6DeviceE"};
constexpr size_t kR8 = 8;

// The file offset to probe `symbol` at, keeping `arguments`; 0 when it is not exported.
uint64_t probe_site(const symbolizer::DefinedSymbol* symbol, const symbolizer::SectionMap& sections,
                    std::initializer_list<size_t> arguments) {
  if (symbol == nullptr) return 0;
  symbolizer::DefinedSymbol probed = *symbol;
  probed.address = symbolizer::emulated_entry_probe_address(sections, symbol->address, arguments);
  return symbolizer::probe_offset(&probed, sections);
}

UprobeSites one_site(const std::string& path, uint64_t offset) {
  if (offset == 0) return {.binary_path = path, .offsets = {}, .cookies = {}};
  return {.binary_path = path, .offsets = {offset}, .cookies = {0}};
}

}  // namespace

MemoryProbeOffsets memory_probe_offsets(const std::string& libc10_path) {
  using namespace symbolizer;
  const ElfFile elf(libc10_path);
  const SectionMap sections(elf);
  const DefinedSymbols symbols(elf);
  const DefinedSymbol* report = nullptr;
  for (const char* name : kReportNames)
    if (report == nullptr) report = symbols.find(name);
  // New reads the block and its size, Delete the block (`this` is rdi in both); the report all
  // five arguments.
  return {.cpu_allocation = probe_site(symbols.find(kNew), sections, {kRsi, kRdx}),
          .cpu_free = probe_site(symbols.find(kDelete), sections, {kRsi}),
          .device_report = probe_site(report, sections, {kRdi, kRsi, kRdx, 2 /* rcx */, kR8})};
}

std::optional<MemoryProbes> plan_memory_probes(const TargetProcess& target, std::string* why) {
  const auto library = target.find_mapped_library(kLibc10);
  if (!library) {
    *why = "the target has not loaded libc10";
    return std::nullopt;
  }
  const MemoryProbeOffsets offsets = memory_probe_offsets(library->host_path);
  if (offsets.cpu_allocation == 0 || offsets.cpu_free == 0) {
    *why = library->path_in_target + " does not export c10::ProfiledCPUMemoryReporter::New and ::Delete";
    return std::nullopt;
  }
  return MemoryProbes{.allocations = one_site(library->host_path, offsets.cpu_allocation),
                      .frees = one_site(library->host_path, offsets.cpu_free),
                      .device_reports = one_site(library->host_path, offsets.device_report),
                      .library = library->path_in_target};
}

}  // namespace tprof
