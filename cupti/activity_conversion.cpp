#include "activity_conversion.h"

#include <cstring>

namespace tprof::cupti {
namespace {

// The record types of the toolkit this is built with (CUDA 13: Kernel10, Memcpy6, Memset4).
// CUPTI fills the newest version it has for each kind, which is the one in these headers.
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using MemsetRecord = CUpti_ActivityMemset4;

template <typename Record>
const Record& as(const CUpti_Activity& record) {
  return *reinterpret_cast<const Record*>(&record);
}

// Where and when something ran on the GPU: the fields kernels, copies and memsets share.
template <typename Record>
void from_gpu_activity(const Record& record, device_activity& out) {
  out.device = record.deviceId;
  out.context = record.contextId;
  out.stream = record.streamId;
  out.correlation = record.correlationId;
  out.start_ns = record.start;
  out.end_ns = record.end;
}

void from_kernel(const KernelRecord& kernel, const Devices& devices, device_activity& out) {
  out.kind = DEVICE_ACTIVITY_KERNEL;
  from_gpu_activity(kernel, out);
  out.name = reinterpret_cast<uintptr_t>(kernel.name);
  out.grid[0] = static_cast<uint32_t>(kernel.gridX);
  out.grid[1] = static_cast<uint32_t>(kernel.gridY);
  out.grid[2] = static_cast<uint32_t>(kernel.gridZ);
  out.block[0] = static_cast<uint32_t>(kernel.blockX);
  out.block[1] = static_cast<uint32_t>(kernel.blockY);
  out.block[2] = static_cast<uint32_t>(kernel.blockZ);
  out.registers_per_thread = kernel.registersPerThread;
  out.shared_memory = static_cast<uint32_t>(kernel.staticSharedMemory) + kernel.dynamicSharedMemory;
  out.active_blocks_per_sm = devices.active_blocks_per_sm(
      {.device = kernel.deviceId,
       .registers_per_thread = kernel.registersPerThread,
       .static_shared_memory = static_cast<uint32_t>(kernel.staticSharedMemory),
       .dynamic_shared_memory = static_cast<uint32_t>(kernel.dynamicSharedMemory),
       .threads_per_block = out.block[0] * out.block[1] * out.block[2]});
}

void from_memcpy(const MemcpyRecord& copy, device_activity& out) {
  out.kind = DEVICE_ACTIVITY_MEMCPY;
  out.copy_kind = copy.copyKind;
  out.source_memory = copy.srcKind;
  out.target_memory = copy.dstKind;
  from_gpu_activity(copy, out);
  out.bytes = copy.bytes;
}

void from_memset(const MemsetRecord& memset, device_activity& out) {
  out.kind = DEVICE_ACTIVITY_MEMSET;
  out.target_memory = static_cast<uint8_t>(memset.memoryKind);
  from_gpu_activity(memset, out);
  out.bytes = memset.bytes;
}

void from_api(const CUpti_ActivityAPI& call, const CorrelationThreads& threads, device_activity& out) {
  out.kind = call.kind == CUPTI_ACTIVITY_KIND_DRIVER ? DEVICE_ACTIVITY_DRIVER : DEVICE_ACTIVITY_RUNTIME;
  out.correlation = call.correlationId;
  out.cbid = call.cbid;
  out.start_ns = call.start;
  out.end_ns = call.end;
  out.thread = threads.thread_of(call.correlationId);
}

void from_synchronization(const CUpti_ActivitySynchronization2& sync, device_activity& out) {
  out.kind = DEVICE_ACTIVITY_SYNC;
  out.copy_kind = static_cast<uint8_t>(sync.type);
  out.context = sync.contextId;
  out.stream = sync.streamId;
  out.correlation = sync.correlationId;
  out.start_ns = sync.start;
  out.end_ns = sync.end;
}

}  // namespace

void CorrelationThreads::remember(uint32_t correlation, uint32_t thread) {
  slots_[correlation % kSlots].correlation_and_thread.store(uint64_t{correlation} << 32 | thread,
                                                            std::memory_order_relaxed);
}

uint32_t CorrelationThreads::thread_of(uint32_t correlation) const {
  const uint64_t entry = slots_[correlation % kSlots].correlation_and_thread.load(std::memory_order_relaxed);
  return entry >> 32 == correlation ? static_cast<uint32_t>(entry) : 0;
}

bool convert_activity(const CUpti_Activity& record, const CorrelationThreads& threads, const Devices& devices,
                      device_activity& out) {
  std::memset(&out, 0, sizeof(out));
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: from_kernel(as<KernelRecord>(record), devices, out); return true;
    case CUPTI_ACTIVITY_KIND_MEMCPY: from_memcpy(as<MemcpyRecord>(record), out); return true;
    case CUPTI_ACTIVITY_KIND_MEMSET: from_memset(as<MemsetRecord>(record), out); return true;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: from_api(as<CUpti_ActivityAPI>(record), threads, out); return true;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      from_synchronization(as<CUpti_ActivitySynchronization2>(record), out);
      return true;
    default: return false;
  }
}

}  // namespace tprof::cupti
