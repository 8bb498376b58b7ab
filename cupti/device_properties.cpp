#include "device_properties.h"

#include <dlfcn.h>

#include <climits>

namespace tprof::cupti {
namespace {

template <typename Function>
bool resolve_one(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, name));
  return function != nullptr;
}

// One integer attribute, or `fallback` where the driver does not know it (an older driver).
int attribute_or(const DriverFunctions& driver, CUdevice device, CUdevice_attribute attribute, int fallback) {
  int value = 0;
  return driver.attribute(&value, attribute, device) == CUDA_SUCCESS ? value : fallback;
}

uint32_t unsigned_value(int value) { return value > 0 ? static_cast<uint32_t>(value) : 0; }

}  // namespace

bool DriverFunctions::resolve(void* library) {
  // cuda.h maps cuDeviceTotalMem to its _v2 ABI; dlsym needs the real symbol name.
  return resolve_one(library, "cuDeviceGetCount", device_count) && resolve_one(library, "cuDeviceGet", device) &&
         resolve_one(library, "cuDeviceGetName", name) && resolve_one(library, "cuDeviceTotalMem_v2", total_memory) &&
         resolve_one(library, "cuDeviceGetAttribute", attribute);
}

bool Devices::read(const DriverFunctions& driver) {
  if (count_.load(std::memory_order_acquire) > 0) return true;
  if (driver.device_count == nullptr) return false;
  int devices = 0;
  if (driver.device_count(&devices) != CUDA_SUCCESS || devices <= 0) return false;
  size_t filled = 0;
  for (int ordinal = 0; ordinal < devices && filled < kMaxDevices; ++ordinal) {
    if (!read_device(driver, ordinal, filled)) break;  // keep device ids equal to indices
    ++filled;
  }
  count_.store(filled, std::memory_order_release);
  return filled > 0;
}

bool Devices::read_device(const DriverFunctions& driver, int ordinal, size_t index) {
  CUdevice device = 0;
  size_t total_memory = 0;
  if (driver.device(&device, ordinal) != CUDA_SUCCESS || driver.total_memory(&total_memory, device) != CUDA_SUCCESS)
    return false;
  if (driver.name(names_[index], kMaxNameBytes - 1, device) != CUDA_SUCCESS) names_[index][0] = '\0';
  const auto get = [&](CUdevice_attribute attribute) { return attribute_or(driver, device, attribute, 0); };

  cudaOccDeviceProp& occupancy = occupancy_properties_[index];
  occupancy.computeMajor = get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  occupancy.computeMinor = get(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  occupancy.maxThreadsPerBlock = get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  occupancy.maxThreadsPerMultiprocessor = get(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  occupancy.regsPerBlock = get(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  occupancy.regsPerMultiprocessor = get(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  occupancy.warpSize = get(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  occupancy.sharedMemPerBlock = unsigned_value(get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK));
  occupancy.sharedMemPerMultiprocessor = unsigned_value(get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR));
  occupancy.numSms = get(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  occupancy.sharedMemPerBlockOptin = unsigned_value(get(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  occupancy.reservedSharedMemPerBlock = unsigned_value(get(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK));

  device_properties& record = records_[index];
  record.kind = DEVICE_ACTIVITY_DEVICE;
  record.device = static_cast<uint32_t>(ordinal);
  record.name = reinterpret_cast<uintptr_t>(names_[index]);
  record.total_global_memory = total_memory;
  record.compute_major = static_cast<uint8_t>(occupancy.computeMajor);
  record.compute_minor = static_cast<uint8_t>(occupancy.computeMinor);
  record.max_threads_per_block = unsigned_value(occupancy.maxThreadsPerBlock);
  record.max_threads_per_multiprocessor = unsigned_value(occupancy.maxThreadsPerMultiprocessor);
  record.registers_per_block = unsigned_value(occupancy.regsPerBlock);
  record.registers_per_multiprocessor = unsigned_value(occupancy.regsPerMultiprocessor);
  record.warp_size = unsigned_value(occupancy.warpSize);
  record.shared_memory_per_block = static_cast<uint32_t>(occupancy.sharedMemPerBlock);
  record.shared_memory_per_multiprocessor = static_cast<uint32_t>(occupancy.sharedMemPerMultiprocessor);
  record.shared_memory_per_block_optin = static_cast<uint32_t>(occupancy.sharedMemPerBlockOptin);
  record.multiprocessors = unsigned_value(occupancy.numSms);
  return true;
}

std::span<const device_properties> Devices::records() const {
  return {records_, count_.load(std::memory_order_acquire)};
}

// Kineto's function attributes (CudaDeviceProperties.cpp kernelOccupancy): no per-function
// thread limit, the default shared-memory configuration.
uint32_t Devices::active_blocks_per_sm(const KernelShape& kernel) const {
  if (kernel.device >= count_.load(std::memory_order_acquire) || kernel.threads_per_block == 0) return 0;
  cudaOccFuncAttributes function;
  function.maxThreadsPerBlock = INT_MAX;
  function.numRegs = static_cast<int>(kernel.registers_per_thread);
  function.sharedSizeBytes = kernel.static_shared_memory;
  function.partitionedGCConfig = PARTITIONED_GC_OFF;
  function.shmemLimitConfig = FUNC_SHMEM_LIMIT_DEFAULT;
  function.maxDynamicSharedSizeBytes = 0;
  const cudaOccDeviceState state{};
  cudaOccResult result{};
  if (cudaOccMaxActiveBlocksPerMultiprocessor(&result, &occupancy_properties_[kernel.device], &function, &state,
                                              static_cast<int>(kernel.threads_per_block),
                                              kernel.dynamic_shared_memory) != CUDA_OCC_SUCCESS)
    return 0;
  return unsigned_value(result.activeBlocksPerMultiprocessor);
}

}  // namespace tprof::cupti
