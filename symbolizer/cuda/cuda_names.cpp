#include "symbolizer/cuda/cuda_names.h"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <unordered_set>

namespace tprof::symbolizer {
namespace {

struct ApiName {
  uint32_t cbid;
  std::string_view name;
};

// Generated at configure time from the CUDA toolkit's cupti_runtime_cbid.h and
// cupti_driver_cbid.h (empty without a toolkit): kRuntimeApiNames and kDriverApiNames.
#include "cuda_api_names.inc"

// CUPTI appends the version its id was introduced in: "cudaLaunchKernel_v7000".
std::string without_version_suffix(std::string_view name) {
  const size_t suffix = name.rfind("_v");
  if (suffix != std::string_view::npos && suffix + 2 < name.size() &&
      name.find_first_not_of("0123456789", suffix + 2) == std::string_view::npos)
    name = name.substr(0, suffix);
  return std::string(name);
}

template <size_t N>
std::string api_name(const std::array<ApiName, N>& table, uint32_t cbid, std::string_view unknown) {
  for (const ApiName& entry : table)
    if (entry.cbid == cbid) return without_version_suffix(entry.name);
  return std::string(unknown) + " " + std::to_string(cbid);
}

// The ids in `table` whose names (without version suffix) are among `names`.
template <size_t N, size_t M>
std::unordered_set<uint32_t> ids_named(const std::array<ApiName, N>& table, const std::string_view (&names)[M]) {
  std::unordered_set<uint32_t> ids;
  for (const ApiName& entry : table)
    if (std::find(std::begin(names), std::end(names), without_version_suffix(entry.name)) != std::end(names))
      ids.insert(entry.cbid);
  return ids;
}

// Kineto's lists, by name: CUPTI's ids differ between toolkits, the names do not.
constexpr std::string_view kHiddenRuntimeCalls[] = {"cudaGetDevice",   "cudaSetDevice",
                                                    "cudaGetLastError", "cudaEventCreate",
                                                    "cudaEventCreateWithFlags", "cudaEventDestroy"};
constexpr std::string_view kShownDriverCalls[] = {"cuLaunchKernel", "cuLaunchKernelEx", "cuMemCreate",
                                                  "cuMemMap",       "cuMemUnmap",       "cuMemRelease",
                                                  "cuMemExportToShareableHandle",
                                                  "cuMemImportFromShareableHandle"};

// Kineto's memcpyKindString and memoryKindString spellings, by CUPTI's enum values.
constexpr std::string_view kCopyKinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                           "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
constexpr std::string_view kMemoryKinds[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                             "Array",   "Managed",  "Device Static", "Managed Static"};
constexpr std::string_view kSynchronizations[] = {"Unknown", "Event Sync", "Stream Wait Event", "Stream Sync",
                                                  "Context Sync"};

template <size_t N>
std::string_view name_at(const std::string_view (&names)[N], uint32_t index) {
  return index < N ? names[index] : names[0];
}

}  // namespace

std::string cuda_runtime_api_name(uint32_t cbid) { return api_name(kRuntimeApiNames, cbid, "cuda runtime API"); }
std::string cuda_driver_api_name(uint32_t cbid) { return api_name(kDriverApiNames, cbid, "cuda driver API"); }

bool torch_profiler_shows_runtime_api(uint32_t cbid) {
  static const std::unordered_set<uint32_t> hidden = ids_named(kRuntimeApiNames, kHiddenRuntimeCalls);
  return !hidden.contains(cbid);
}

bool torch_profiler_shows_driver_api(uint32_t cbid) {
  static const std::unordered_set<uint32_t> shown = ids_named(kDriverApiNames, kShownDriverCalls);
  return shown.contains(cbid);
}

std::string memcpy_name(uint32_t copy_kind, uint32_t source_memory, uint32_t target_memory) {
  return "Memcpy " + std::string(name_at(kCopyKinds, copy_kind)) + " (" +
         std::string(name_at(kMemoryKinds, source_memory)) + " -> " + std::string(name_at(kMemoryKinds, target_memory)) +
         ")";
}

std::string memset_name(uint32_t memory_kind) { return "Memset (" + std::string(name_at(kMemoryKinds, memory_kind)) + ")"; }

std::string synchronization_name(uint32_t type) { return std::string(name_at(kSynchronizations, type)); }

std::string demangled_kernel_name(const std::string& name) {
  int status = 0;
  const std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), &std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : name;
}

}  // namespace tprof::symbolizer
