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

void from_api(const CUpti_ActivityAPI& call, device_activity& out) {
  out.kind = call.kind == CUPTI_ACTIVITY_KIND_DRIVER ? DEVICE_ACTIVITY_DRIVER : DEVICE_ACTIVITY_RUNTIME;
  out.correlation = call.correlationId;
  out.cbid = call.cbid;
  out.start_ns = call.start;
  out.end_ns = call.end;
  out.thread = call.threadId;
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

double ClockMap::rate_between(const Reading& earlier, const Reading& later) {
  return static_cast<double>(later.monotonic_ns - earlier.monotonic_ns) /
         static_cast<double>(later.cupti_time - earlier.cupti_time);
}

void ClockMap::add_reading(uint64_t cupti_time, uint64_t monotonic_ns) {
  const Reading reading{.valid = true, .cupti_time = cupti_time, .monotonic_ns = monotonic_ns};
  // Rates need readings some way apart: over a shorter span, a reading's own error (a tenth of a
  // microsecond) would weigh too much. And not too far apart: NTP slews CLOCK_MONOTONIC by a few
  // parts per million, which hours would average away from the rate of the last seconds.
  constexpr uint64_t kMinSpanNs = 10'000'000, kMaxSpanNs = 10'000'000'000;
  if (!first_.valid || cupti_time <= latest_.cupti_time || monotonic_ns <= latest_.monotonic_ns) {
    first_ = latest_ = reading;  // the first, or a clock that went back: another source
    rate_ = 1.0;
    return;
  }
  if (monotonic_ns - first_.monotonic_ns > kMaxSpanNs && latest_.monotonic_ns - first_.monotonic_ns >= kMinSpanNs &&
      monotonic_ns - latest_.monotonic_ns >= kMinSpanNs)
    first_ = latest_;
  latest_ = reading;
  if (latest_.monotonic_ns - first_.monotonic_ns >= kMinSpanNs) rate_ = rate_between(first_, latest_);
}

uint64_t ClockMap::to_monotonic(uint64_t cupti_time) const {
  if (!latest_.valid || cupti_time == 0) return cupti_time;
  const double since = (static_cast<double>(cupti_time) - static_cast<double>(latest_.cupti_time)) * rate_;
  const double monotonic = static_cast<double>(latest_.monotonic_ns) + since;
  return monotonic <= 0 ? 0 : static_cast<uint64_t>(monotonic);
}

bool convert_activity(const CUpti_Activity& record, const ClockMap& clock, const Devices& devices,
                      device_activity& out) {
  std::memset(&out, 0, sizeof(out));
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: from_kernel(as<KernelRecord>(record), devices, out); break;
    case CUPTI_ACTIVITY_KIND_MEMCPY: from_memcpy(as<MemcpyRecord>(record), out); break;
    case CUPTI_ACTIVITY_KIND_MEMSET: from_memset(as<MemsetRecord>(record), out); break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: from_api(as<CUpti_ActivityAPI>(record), out); break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      from_synchronization(as<CUpti_ActivitySynchronization2>(record), out);
      break;
    default: return false;
  }
  out.start_ns = clock.to_monotonic(out.start_ns);
  out.end_ns = clock.to_monotonic(out.end_ns);
  return true;
}

}  // namespace tprof::cupti
