// --memory: where torch's allocators tell of their blocks, in libc10 (torch 1.13, 2.6 and 2.14
// alike). DefaultCPUAllocator calls c10::ProfiledCPUMemoryReporter::New(ptr, nbytes) after
// every allocation and ::Delete(ptr) before every free, profiler or not (c10/core/CPUAllocator.cpp);
// the CUDA caching allocator calls c10::reportMemoryUsageToProfiler(ptr, size, allocated,
// reserved, device) at every malloc and free. torch's profile_memory=True reports from these
// calls, so tprof sees the blocks torch would. The probes read their arguments where the kernel
// emulates the probed instruction (symbolizer/binary/emulated_probe_point.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "userspace/loader/uprobe_multi.h"
#include "userspace/session/target_process.h"

namespace tprof {

// File offsets in one libc10; 0 where the function is not exported.
struct MemoryProbeOffsets {
  uint64_t cpu_allocation = 0;   // ProfiledCPUMemoryReporter::New
  uint64_t cpu_free = 0;         // ProfiledCPUMemoryReporter::Delete
  uint64_t device_report = 0;    // reportMemoryUsageToProfiler
};
MemoryProbeOffsets memory_probe_offsets(const std::string& libc10_path);

struct MemoryProbes {
  UprobeSites allocations;     // New
  UprobeSites frees;           // Delete
  UprobeSites device_reports;  // reportMemoryUsageToProfiler; no offsets where not exported
  std::string library;         // libc10 as the target maps it
};

// None, with `why` saying so, when the target maps no libc10 or it lacks New or Delete.
std::optional<MemoryProbes> plan_memory_probes(const TargetProcess& target, std::string* why);

}  // namespace tprof
