#include "userspace/session/session_tracer.h"

#include <algorithm>

#include "userspace/assemble/wall_clock.h"

namespace tprof {
namespace {

// How long after its timestamp a record may still reach the ring buffer: BPF stamps a record
// before it reserves its slot, and a program can be preempted in between. Records older than
// the drain time minus this are final.
constexpr uint64_t kRecordSkewBoundNs = 50'000'000;
// Records decoded before the closers take them: what waits between the two stays near this.
constexpr size_t kRecordsPerBatch = 50'000;

}  // namespace

void SessionTracer::start_loading() {
  if (tracer_ || loading_.valid()) return;
  loading_ = std::async(std::launch::async, [bytes = ring_buffer_bytes_] { return std::make_unique<OpTracer>(bytes); });
}

OpTracer& SessionTracer::tracer() {
  if (!tracer_) {
    tracer_ = loading_.valid() ? loading_.get() : std::make_unique<OpTracer>(ring_buffer_bytes_);
    consumer_ = std::make_unique<RecordConsumer>(tracer_->ring_buffer_fd(), router_);
  }
  return *tracer_;
}

// While records are left in the ring buffer, the watermark stays a skew bound behind the last
// one decoded: the ring holds records in about the order they were stamped, so those left there
// are no older than that, and none of them arrives behind a passed watermark.
void SessionTracer::drain(uint64_t time_limit_ns, const std::function<void(uint64_t watermark_ns)>& advance) {
  if (!consumer_) return;
  const uint64_t drain_ns = monotonic_now_ns();
  const uint64_t watermark_ns = drain_ns - std::min(drain_ns, kRecordSkewBoundNs);
  for (bool more = true; more;) {
    more = consumer_->drain(kRecordsPerBatch);
    const uint64_t last_ns = router_.last_timestamp_ns();
    advance(more ? std::min(watermark_ns, last_ns - std::min(last_ns, kRecordSkewBoundNs)) : watermark_ns);
    if (time_limit_ns != 0 && monotonic_now_ns() - drain_ns > time_limit_ns) break;
  }
}

}  // namespace tprof
