// Where the time to attach to a target went, for its `attached` line: from tprof's start (or,
// for a target found later, from when its planning began) to every probe live, and the three
// steps that take it: planning (libtorch_cpu's plan made, read from the plan cache, or shared
// with another target; Python, libc10, the exits), loading the BPF object (the kernel verifies
// it once a session), linking the probes into the target.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "userspace/session/torch_library_plan.h"

namespace tprof {

struct AttachTimings {
  uint64_t since_ns = 0;  // monotonic, as every mark below
  uint64_t planning_ns = 0;
  uint64_t loading_ns = 0;
  uint64_t loaded_ns = 0;
  uint64_t linking_ns = 0;
  uint64_t linked_ns = 0;
  std::optional<PlanSource> library_plan;  // none when the target has no libtorch_cpu

  // "142.0 ms (plan 12.3 ms from cache, load 60.1 ms, link 40.2 ms)"
  std::string describe() const;
};

}  // namespace tprof
