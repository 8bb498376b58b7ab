#include "userspace/loader/exit_probes.h"

#include <set>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/function_bounds.h"
#include "symbolizer/binary/function_exits.h"

namespace tprof {
namespace {

constexpr const char* kCppRuntimePrefix = "libstdc++.so";
constexpr const char* kBeginCatch = "__cxa_begin_catch";

UprobeSites sites_in(const std::string& binary_path, const std::set<uint64_t>& offsets) {
  UprobeSites sites;
  sites.binary_path = binary_path;
  sites.offsets.assign(offsets.begin(), offsets.end());
  sites.cookies.assign(offsets.size(), 0);  // range_return finds its range by stack pointer
  return sites;
}

// __cxa_begin_catch of the libstdc++ the target has mapped; no offsets when there is none.
UprobeSites catch_sites(const TargetProcess& target) {
  const auto runtime = target.find_mapped_library(kCppRuntimePrefix);
  if (!runtime) return {};
  const symbolizer::ElfFile elf(runtime->host_path);
  const symbolizer::SectionMap sections(elf);
  const symbolizer::DefinedSymbols symbols(elf);
  const uint64_t offset = symbolizer::probe_offset(symbols.find(kBeginCatch), sections);
  if (offset == 0) return {};
  return sites_in(runtime->host_path, {offset});
}

}  // namespace

std::vector<uint64_t> plan_return_offsets(const symbolizer::LibraryIndex& index,
                                          const std::vector<uint64_t>& function_addresses) {
  const symbolizer::FunctionBounds bounds(index.elf, index.sections);
  symbolizer::FunctionExitFinder finder(index.sections, bounds);
  std::set<uint64_t> return_offsets;  // a `ret` shared by several functions is probed once
  for (const uint64_t address : function_addresses) {
    for (const uint64_t ret : finder.exits_of(address).returns)
      if (const auto offset = index.sections.file_offset_of(ret)) return_offsets.insert(*offset);
  }
  return {return_offsets.begin(), return_offsets.end()};
}

ExitProbes plan_exit_probes(const std::string& torch_host_path, const std::vector<uint64_t>& return_offsets,
                            const TargetProcess& target) {
  return {sites_in(torch_host_path, {return_offsets.begin(), return_offsets.end()}), catch_sites(target)};
}

}  // namespace tprof
