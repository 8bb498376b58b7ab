// A CUDA driver that knows one GPU, an H100 SXM as its driver describes it (the figures of
// Kineto's deviceProperties for that card), for tests with no GPU: the device queries the
// injection library makes, with the driver API's signatures.
#pragma once

#include <cuda.h>

#include <cstring>

namespace tprof::testing::fake_driver {

constexpr char kName[] = "NVIDIA H100 80GB HBM3";
constexpr size_t kTotalMemory = 85'045'608'448;

inline CUresult device_count(int* count) {
  *count = 1;
  return CUDA_SUCCESS;
}

inline CUresult device(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

inline CUresult name(char* name, int length, CUdevice) {
  std::strncpy(name, kName, static_cast<size_t>(length));
  return CUDA_SUCCESS;
}

inline CUresult total_memory(size_t* bytes, CUdevice) {
  *bytes = kTotalMemory;
  return CUDA_SUCCESS;
}

inline CUresult attribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *value = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *value = 65536; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *value = 233472; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 232448; break;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: *value = 1024; break;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

}  // namespace tprof::testing::fake_driver
