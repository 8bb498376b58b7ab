#include "userspace/loader/exit_probes.h"

#include <set>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/function_bounds.h"
#include "symbolizer/binary/function_exits.h"

namespace tprof {
namespace {

constexpr const char* kCppRuntimePrefix = "libstdc++.so";
constexpr const char* kBeginCatch = "__cxa_begin_catch";

// __cxa_begin_catch of the libstdc++ the target has mapped; no offsets when there is none.
UprobeSites catch_sites(const TargetProcess& target) {
  const auto runtime = target.find_mapped_library(kCppRuntimePrefix);
  if (!runtime) return {};
  const symbolizer::ElfFile elf(runtime->host_path);
  const symbolizer::SectionMap sections(elf);
  const symbolizer::DefinedSymbols symbols(elf);
  const uint64_t offset = symbolizer::probe_offset(symbols.find(kBeginCatch), sections);
  if (offset == 0) return {};
  return exit_sites(runtime->host_path, {offset});
}

}  // namespace

UprobeSites exit_sites(const std::string& binary_path, const std::vector<uint64_t>& offsets) {
  // No cookies: range_return finds its range by stack pointer, and a catch needs none.
  return UprobeSites{binary_path, offsets, std::vector<uint64_t>(offsets.size(), 0)};
}

ReturnSites plan_return_sites(const symbolizer::LibraryIndex& index, const std::vector<uint64_t>& function_addresses) {
  const symbolizer::FunctionBounds bounds(index.elf, index.sections);
  symbolizer::FunctionExitFinder finder(index.sections, bounds);
  ReturnSites sites;
  for (size_t function = 0; function < function_addresses.size(); ++function) {
    for (const uint64_t ret : finder.exits_of(function_addresses[function]).returns) {
      const auto offset = index.sections.file_offset_of(ret);
      if (!offset) continue;
      sites.offsets.push_back(*offset);
      sites.functions.push_back(static_cast<uint32_t>(function));
    }
  }
  return sites;
}

std::vector<uint64_t> probed_return_offsets(const ReturnSites& returns, const std::function<bool(uint32_t)>& probed) {
  std::set<uint64_t> offsets;  // a `ret` shared by several functions is probed once
  for (size_t at = 0; at < returns.offsets.size(); ++at)
    if (probed(returns.functions[at])) offsets.insert(returns.offsets[at]);
  return {offsets.begin(), offsets.end()};
}

ExitProbes plan_exit_probes(const std::string& torch_host_path, const std::vector<uint64_t>& return_offsets,
                            const TargetProcess& target) {
  return {exit_sites(torch_host_path, return_offsets), catch_sites(target)};
}

}  // namespace tprof
