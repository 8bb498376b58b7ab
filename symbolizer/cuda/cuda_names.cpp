#include "symbolizer/cuda/cuda_names.h"

#include <cxxabi.h>

#include <array>
#include <cstdlib>
#include <memory>
#include <string_view>

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
