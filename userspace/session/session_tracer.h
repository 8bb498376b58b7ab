// The op tracer of a session, shared by all its targets: one BPF object and one ring buffer,
// whose records are split by process among the targets' decoders and closed up to one
// watermark for all of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>

#include "userspace/ingest/record_consumer.h"
#include "userspace/loader/op_tracer.h"

namespace tprof {

class SessionTracer {
 public:
  explicit SessionTracer(size_t ring_buffer_bytes) : ring_buffer_bytes_(ring_buffer_bytes) {}

  // Starts loading the op tracer on a thread of its own, so that the kernel verifies it while
  // the first target is planned (the load is most of a warm attach). A load that fails is
  // reported by tracer(), after the target's own checks.
  void start_loading();
  // The op tracer, loaded by the first call (or by start_loading's thread), once the first
  // target has passed its checks (so that missing privileges are named as such, not as a load
  // failure). Throws tprof::Error.
  OpTracer& tracer();
  RecordRouter& router() { return router_; }

  // Decodes what waits in the ring buffer, a batch at a time, into the targets' decoders. After
  // each batch `advance` gets the watermark up to which every target's records are final.
  // Returns after `time_limit_ns` (0: once the ring buffer is empty), so that a drain that
  // falls behind still lets a stop signal be seen; the rest waits in the ring buffer.
  // Throws tprof::Error when reading fails.
  void drain(uint64_t time_limit_ns, const std::function<void(uint64_t watermark_ns)>& advance);

  // Records that named no target (of a process no longer recorded, or malformed).
  uint64_t unrouted() const { return router_.unrouted(); }

 private:
  const size_t ring_buffer_bytes_;
  std::future<std::unique_ptr<OpTracer>> loading_;
  std::unique_ptr<OpTracer> tracer_;
  RecordRouter router_;
  std::unique_ptr<RecordConsumer> consumer_;
};

}  // namespace tprof
