// libtprof_cupti_feeder.so, for the GPU boundary test: does on the calling thread what CUDA and
// CUPTI would do for a kernel launch and a copy, with no GPU. It makes a real cudaLaunchKernel
// call into the toolkit's libcudart (which fails without a driver), then hands the library a
// completed activity buffer built from CUPTI's own record structs: the runtime calls, stamped
// in CUPTI's clock and named by CUPTI's thread id (the low half of pthread_self()) as CUPTI
// does, the kernel and the copy.
// It also stands in for the CUDA driver's device queries (tests/cupti/fake_driver.h, one H100):
// loaded into the process's global scope, it is the driver the library finds and asks for the
// GPUs' properties when tprof attaches.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <x86intrin.h>

#include <cstdint>

#include "tests/cupti/cupti_records.h"
#include "tests/cupti/fake_driver.h"

namespace {

using BufferCompleted = void (*)(void*, uint32_t, uint8_t*, size_t, size_t);
using LaunchKernel = cudaError_t (*)(const void*, dim3, dim3, void**, size_t, cudaStream_t);

BufferCompleted buffer_completed = nullptr;
LaunchKernel launch_kernel = nullptr;

constexpr char kKernelName[] = "_Z11tprof_scalePfi";  // tprof_scale(float*, int)
constexpr uint32_t kStream = 7;

// The clock CUPTI stamps records with: the one the library registers, the TSC.
uint64_t cupti_now() { return __rdtsc(); }

void add_api_record(tprof::testing::ActivityBuffer& buffer, CUpti_CallbackId cbid, uint32_t correlation,
                    uint64_t start, uint64_t end) {
  auto& record = buffer.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  record.cbid = cbid;
  record.correlationId = correlation;
  record.start = start;
  record.end = end;
  record.threadId = static_cast<uint32_t>(pthread_self());  // as CUPTI names the calling thread
}

}  // namespace

extern "C" {

namespace fake = tprof::testing::fake_driver;

__attribute__((visibility("default"))) CUresult cuDeviceGetCount(int* count) { return fake::device_count(count); }
__attribute__((visibility("default"))) CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  return fake::device(device, ordinal);
}
__attribute__((visibility("default"))) CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  return fake::name(name, length, device);
}
// cuda.h names this cuDeviceTotalMem_v2, the symbol the driver exports.
__attribute__((visibility("default"))) CUresult cuDeviceTotalMem(size_t* bytes, CUdevice device) {
  return fake::total_memory(bytes, device);
}
__attribute__((visibility("default"))) CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute,
                                                                     CUdevice device) {
  return fake::attribute(value, attribute, device);
}

// Resolves the injection library (already loaded by the host) and libcudart. 0 on success.
int tprof_feeder_setup(const char* injection_library, const char* cudart_library) {
  void* injection = dlopen(injection_library, RTLD_NOW | RTLD_NOLOAD);
  void* cudart = dlopen(cudart_library, RTLD_NOW | RTLD_LOCAL);
  if (injection == nullptr || cudart == nullptr) return 1;
  buffer_completed = reinterpret_cast<BufferCompleted>(dlsym(injection, "tprof_cupti_buffer_completed"));
  launch_kernel = reinterpret_cast<LaunchKernel>(dlsym(cudart, "cudaLaunchKernel"));
  return buffer_completed && launch_kernel ? 0 : 2;
}

// One launch (correlation `correlation`), one copy (`correlation + 1`) and one cudaGetDevice
// (`correlation + 2`), a call torch.profiler leaves out. Returns what cudaLaunchKernel returned.
int tprof_feeder_launch(uint32_t correlation) {
  tprof::testing::ActivityBuffer buffer;
  const uint64_t launch_start = cupti_now();
  const cudaError_t result = launch_kernel(reinterpret_cast<const void*>(&tprof_feeder_launch), dim3(4, 1, 1),
                                           dim3(256, 1, 1), nullptr, 0, nullptr);
  const uint64_t launch_end = cupti_now();
  add_api_record(buffer, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, correlation, launch_start, launch_end);

  const uint64_t copy_start = cupti_now();
  const uint64_t copy_end = cupti_now() + 1'000;
  add_api_record(buffer, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, correlation + 1, copy_start, copy_end);

  const uint64_t query_start = cupti_now();
  add_api_record(buffer, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, correlation + 2, query_start,
                 cupti_now() + 500);

  auto& kernel = buffer.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.name = kKernelName;
  kernel.correlationId = correlation;
  kernel.start = launch_end + 5'000;
  kernel.end = launch_end + 25'000;
  kernel.streamId = kStream;
  kernel.contextId = 1;
  kernel.gridX = 4;
  kernel.gridY = kernel.gridZ = 1;
  kernel.blockX = 256;
  kernel.blockY = kernel.blockZ = 1;
  kernel.registersPerThread = 32;
  auto& copy = buffer.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.correlationId = correlation + 1;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  copy.bytes = 4096;
  copy.start = launch_end + 30'000;
  copy.end = launch_end + 32'000;
  copy.streamId = kStream;
  copy.contextId = 1;
  buffer_completed(nullptr, 0, buffer.release_copy(), buffer.size(), buffer.size());
  return static_cast<int>(result);
}

}  // extern "C"
