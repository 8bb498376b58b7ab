#include "userspace/loader/cuda_api_probes.h"

#include <set>
#include <string_view>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/function_bounds.h"
#include "symbolizer/binary/function_exits.h"
#include "symbolizer/binary/section_map.h"

namespace tprof {
namespace {

struct ApiLibrary {
  const char* file_name_prefix;
  model::RangeKind kind;
  std::vector<std::string_view> functions;
};

// The calls torch.profiler's consumers know as launches and syncs (formats.md §2.5.4).
const ApiLibrary kApiLibraries[] = {
    {"libcudart.so",
     model::RangeKind::kCudaRuntime,
     {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpy", "cudaMemcpyAsync", "cudaMemsetAsync",
      "cudaStreamSynchronize", "cudaDeviceSynchronize"}},
    {"libcuda.so", model::RangeKind::kCudaDriver, {"cuLaunchKernel", "cuLaunchKernelEx"}},
};

void plan_library(const MappedLibrary& library, const ApiLibrary& api, std::vector<model::Operator>& operators,
                  CudaApiProbes& probes) {
  const symbolizer::ElfFile elf(library.host_path);
  const symbolizer::SectionMap sections(elf);
  const symbolizer::DefinedSymbols symbols(elf);
  const symbolizer::FunctionBounds bounds(elf, sections);
  symbolizer::FunctionExitFinder exits(sections, bounds);
  UprobeSites entries{.binary_path = library.host_path, .offsets = {}, .cookies = {}};
  std::set<uint64_t> return_offsets;
  for (const std::string_view name : api.functions) {
    const symbolizer::DefinedSymbol* symbol = symbols.find(name);
    const uint64_t entry = symbolizer::probe_offset(symbol, sections);
    if (entry == 0) continue;
    const symbolizer::FunctionExits found = exits.exits_of(symbol->address);
    if (found.returns.empty()) continue;  // its end could not be found: not probed at all
    for (const uint64_t ret : found.returns)
      if (const auto offset = sections.file_offset_of(ret)) return_offsets.insert(*offset);
    entries.offsets.push_back(entry);
    entries.cookies.push_back(operators.size());
    operators.push_back({std::string(name), "", api.kind, {}, ""});
    ++probes.functions;
  }
  if (entries.offsets.empty()) return;
  probes.entries.push_back(std::move(entries));
  probes.returns.push_back({.binary_path = library.host_path,
                            .offsets = {return_offsets.begin(), return_offsets.end()},
                            .cookies = std::vector<uint64_t>(return_offsets.size(), 0)});
}

}  // namespace

CudaApiProbes plan_cuda_api_probes(const TargetProcess& target, std::vector<model::Operator>& operators) {
  CudaApiProbes probes;
  for (const ApiLibrary& api : kApiLibraries) {
    if (const auto library = target.find_mapped_library(api.file_name_prefix))
      plan_library(*library, api, operators, probes);
  }
  return probes;
}

}  // namespace tprof
