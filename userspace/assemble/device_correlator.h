// Links GPU activity to the ops that caused it, as Kineto does: a CUDA API call belongs to the
// innermost op or annotation open on its thread while it ran ("External id"), and a kernel,
// copy, memset or sync to the API call with its CUPTI correlation id (its External id, and an
// ac2g arrow from the call).
//
// CUPTI hands its buffers over late (the library asks for them every 200 ms), after the span
// closer has handed the enclosing ops on. So the correlator keeps, per thread, the ranges closed
// in the last kHistoryNs, and holds each record until the watermark has passed its end: by
// then every op that encloses it has closed, or is still open in the closer (asked through
// `open_range`). A GPU activity waits for its API call at most kLaunchWaitNs; past that, or at
// finish, it goes out unlinked. Memory is bounded by the history and by kMaxWaiting. A GPU's
// properties go straight on, and give its kernels Kineto's occupancy estimates.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "device_activity.h"
#include "model/trace_model.h"
#include "model/trace_sink.h"
#include "userspace/assemble/wall_clock.h"

namespace tprof {

class DeviceCorrelator {
 public:
  static constexpr uint64_t kHistoryNs = 3'000'000'000;
  static constexpr uint64_t kLaunchWaitNs = 2'000'000'000;
  static constexpr size_t kMaxWaiting = 200'000;  // records waiting; past it the oldest go out as they are
  // How far back from an API call's start the innermost enclosing range is looked for among the
  // thread's closed ranges (its earlier siblings come first).
  static constexpr size_t kMaxRangesScanned = 256;

  struct Counts {
    uint64_t kernels = 0;
    uint64_t copies = 0;     // memcpy and memset
    uint64_t syncs = 0;
    uint64_t api_calls = 0;
    uint64_t api_calls_in_ops = 0;    // with an enclosing op or annotation
    uint64_t api_calls_hidden = 0;    // calls torch.profiler leaves out, left out likewise
    uint64_t api_calls_without_thread = 0;  // CUPTI's record named no thread tprof could find
    uint64_t linked = 0;              // GPU activities linked to their API call
    uint64_t devices = 0;             // GPUs whose properties the library sent
    uint64_t dropped_by_cupti = 0;    // records CUPTI dropped for want of buffer space
    uint64_t untimed = 0;             // records CUPTI handed over unfinished, with no time, and left out
    int32_t refusal = 0;              // why the library stayed dormant (a CUptiResult); 0: it did not
    uint64_t handed_over_ns = 0;      // when the target's own profiler took CUPTI over; 0: it did not
  };

  struct Callbacks {
    // The record id of the innermost range still open on `tid` that began at or before `unix_ns`; 0: none.
    std::function<uint64_t(uint32_t tid, uint64_t unix_ns)> open_range;
    // A string read from the target at an address the library sent (a kernel's or GPU's name);
    // "" if unreadable.
    std::function<std::string(uint64_t address)> target_string;
    // The OS thread (tid) of CUPTI's thread id for an API call (the low half of the caller's
    // pthread_self()); 0: unknown.
    std::function<uint32_t(uint32_t cupti_thread)> os_thread;
  };

  DeviceCorrelator(MonotonicToUnix clock, Callbacks callbacks, model::TraceSink& sink);

  void range_closed(uint32_t tid, const model::OpSpan& span);  // every range, as the closer hands it on
  void add(const device_activity& record);
  // Hands on what the watermark (monotonic ns) has passed and forgets what is too old.
  void advance(uint64_t watermark_monotonic_ns);
  void finish();  // everything left, linked where it can be

  const Counts& counts() const { return counts_; }

 private:
  struct ClosedRange {
    uint64_t end_ns;
    uint64_t record_id;
  };
  struct ApiCall {
    uint64_t external_id;
    uint32_t tid;
    uint64_t start_ns;
    uint64_t end_ns;  // forgotten kHistoryNs after it
  };

  void add_device(const device_properties& record);
  model::DeviceActivity to_model(const device_activity& record);
  void estimate_occupancy(const device_activity& kernel, model::DeviceActivity& activity) const;
  void hand_on_api_call(model::DeviceActivity& call);
  void hand_on_gpu_activity(model::DeviceActivity& activity);
  uint64_t enclosing_range(uint32_t tid, uint64_t start_ns, uint64_t end_ns) const;
  // Hands on the API calls that end by `watermark_ns`, then the GPU activities whose call is
  // known or that waited long enough; all of them with `everything`.
  void hand_on_ready(uint64_t watermark_ns, bool everything);
  void forget_before(uint64_t unix_ns);

  MonotonicToUnix clock_;
  Callbacks callbacks_;
  model::TraceSink& sink_;
  // Per thread: closed ranges by (start, depth); the innermost of equal starts sorts last.
  std::unordered_map<uint32_t, std::map<std::pair<uint64_t, uint32_t>, ClosedRange>> closed_;
  std::deque<model::DeviceActivity> waiting_;           // in arrival order
  std::unordered_map<uint32_t, ApiCall> api_calls_;     // by correlation id
  std::unordered_map<uint64_t, std::string> kernel_names_;  // by name address
  std::unordered_map<uint32_t, model::DeviceProperties> devices_;  // by device index
  Counts counts_;
};

}  // namespace tprof
