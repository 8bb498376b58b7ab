// The loaded op tracer (bpf/op_tracer.bpf.c): its skeleton, its uprobe_multi links, the
// Python stack sampler's perf events, and its maps, owned together.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "python_stack.h"
#include "userspace/unique_fd.h"
#include "userspace/uprobe_multi.h"

struct op_tracer;

namespace tprof {

struct OpTracerOptions {
  size_t ring_buffer_bytes = 64u << 20;  // rounded up to a power of two
  pid_t target_pid = 0;                  // in tprof's PID namespace
  // Where the target's interpreter keeps its frames; none: no Python stacks.
  std::optional<python_walker_config> python;
};

struct LossCounts {
  uint64_t ring_buffer_full = 0;   // records dropped
  uint64_t stack_unreadable = 0;   // Python stacks that could not be walked
  uint64_t stack_not_stored = 0;   // walked stacks that found no room in the stack map
};

class OpTracer {
 public:
  // Opens and loads the programs. Throws tprof::Error.
  explicit OpTracer(const OpTracerOptions& options);
  ~OpTracer();
  OpTracer(const OpTracer&) = delete;
  OpTracer& operator=(const OpTracer&) = delete;

  // Entry and return probes on every op site, for the target's threads.
  void attach_ops(const UprobeSites& sites);
  // A CPU-clock sampler on every CPU at `frequency_hz` that records the target's Python
  // stacks between ops. Only with Python stacks enabled.
  void attach_python_sampler(uint32_t frequency_hz);
  // Removes every probe. Records already in the ring buffer stay readable.
  void detach();

  int ring_buffer_fd() const;
  int python_stacks_fd() const;
  LossCounts losses() const;  // summed over CPUs

 private:
  struct SkeletonDeleter {
    void operator()(op_tracer* skeleton) const;
  };
  std::unique_ptr<op_tracer, SkeletonDeleter> skeleton_;
  pid_t target_pid_;
  BpfLink entry_link_;
  BpfLink return_link_;
  std::vector<UniqueFd> sampler_events_;
  std::vector<BpfLink> sampler_links_;
};

}  // namespace tprof
