// The loaded op tracer (bpf/op_tracer.bpf.c): its skeleton, its two uprobe_multi links and
// its maps, owned together.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "userspace/uprobe_multi.h"

struct op_tracer;

namespace tprof {

class OpTracer {
 public:
  // Opens and loads the programs with a ring buffer of at least `ring_buffer_bytes`
  // (rounded up to a power of two). Throws tprof::Error.
  explicit OpTracer(size_t ring_buffer_bytes);
  ~OpTracer();
  OpTracer(const OpTracer&) = delete;
  OpTracer& operator=(const OpTracer&) = delete;

  // Entry and return probes on every site, for `pid`'s threads.
  void attach(pid_t pid, const UprobeSites& sites);
  // Removes the probes. Records already in the ring buffer stay readable.
  void detach();

  int ring_buffer_fd() const;
  uint64_t dropped_records() const;  // summed over CPUs

 private:
  struct SkeletonDeleter {
    void operator()(op_tracer* skeleton) const;
  };
  std::unique_ptr<op_tracer, SkeletonDeleter> skeleton_;
  BpfLink entry_link_;
  BpfLink return_link_;
};

}  // namespace tprof
