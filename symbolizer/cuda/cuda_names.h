// Names of what CUDA's profiling interface reports by number: the runtime and driver API
// functions (CUPTI callback ids), copy and memory kinds, synchronization types, and kernels'
// mangled names, as Kineto writes them in its traces.
#pragma once

#include <cstdint>
#include <string>

namespace tprof::symbolizer {

// "cudaLaunchKernel", "cuLaunchKernel": the function, without CUPTI's version suffix ("_v7000").
// Unknown ids (a newer toolkit than tprof was built with) read "cuda runtime API 1234".
std::string cuda_runtime_api_name(uint32_t cbid);
std::string cuda_driver_api_name(uint32_t cbid);

// Whether torch.profiler shows a call (Kineto's CuptiCbidRegistry): every runtime call but
// cudaGetDevice, cudaSetDevice, cudaGetLastError and cudaEvent{Create,CreateWithFlags,Destroy},
// which are frequent and say little; of the driver's, only the launches (cuLaunchKernel,
// cuLaunchKernelEx: Triton's) and the virtual-memory calls (cuMemCreate, cuMemMap, ...).
bool torch_profiler_shows_runtime_api(uint32_t cbid);
bool torch_profiler_shows_driver_api(uint32_t cbid);

// "Memcpy HtoD (Pageable -> Device)", from CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind.
std::string memcpy_name(uint32_t copy_kind, uint32_t source_memory, uint32_t target_memory);
// "Memset (Device)".
std::string memset_name(uint32_t memory_kind);
// "Context Sync", "Stream Sync", "Event Sync", "Stream Wait Event", from
// CUpti_ActivitySynchronizationType.
std::string synchronization_name(uint32_t type);

// A kernel's name demangled ("void gemm<float>(Params)"); names that do not demangle as given.
std::string demangled_kernel_name(const std::string& name);

}  // namespace tprof::symbolizer
