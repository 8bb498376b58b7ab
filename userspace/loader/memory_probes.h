// --memory: where torch's CPU allocator tells of its blocks. DefaultCPUAllocator calls
// c10::ProfiledCPUMemoryReporter::New(ptr, nbytes) after every allocation and ::Delete(ptr)
// before every free, profiler or not (c10/core/CPUAllocator.cpp); torch's profile_memory=True
// reports from the same two calls, so tprof sees the blocks torch would. Both are exported by
// libc10 in torch 1.13, 2.6 and 2.14. The probes read their arguments (rsi, rdx) where the kernel
// emulates the probed instruction (symbolizer/binary/emulated_probe_point.h).
#pragma once

#include <optional>
#include <string>

#include "userspace/loader/uprobe_multi.h"
#include "userspace/session/target_process.h"

namespace tprof {

struct MemoryProbes {
  UprobeSites allocations;  // New
  UprobeSites frees;        // Delete
  std::string library;      // libc10 as the target maps it
};

// None, with `why` saying so, when the target maps no libc10 or it lacks either function.
std::optional<MemoryProbes> plan_memory_probes(const TargetProcess& target, std::string* why);

}  // namespace tprof
