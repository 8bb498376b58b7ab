// CUPTI's activity records, as the toolkit the library was built with lays them out, turned into
// tprof's fixed device_activity records (bpf/device_activity.h). Pure, so that tests can feed
// it records built by hand.
#pragma once

#include <cupti_activity.h>

#include <atomic>
#include <cstdint>

#include "device_activity.h"
#include "device_properties.h"

namespace tprof::cupti {

// Which OS thread made each recent runtime or driver call, by correlation id. CUPTI's own
// `threadId` is not the OS thread id (it is derived from pthread_self), so the library notes the
// caller's gettid() in an API-entry callback and the conversion looks it up here. A fixed table
// indexed by correlation id: no allocation, no lock; a slot reused by a later call only loses
// the older call's thread (then 0: unknown).
class CorrelationThreads {
 public:
  static constexpr uint32_t kSlots = 1 << 16;
  void remember(uint32_t correlation, uint32_t thread);
  uint32_t thread_of(uint32_t correlation) const;  // 0 when not (or no longer) known

 private:
  struct Slot {
    std::atomic<uint64_t> correlation_and_thread{0};  // correlation << 32 | thread
  };
  Slot slots_[kSlots];
};

// Fills `out` for a kernel, memcpy, memset, runtime or driver call, or synchronization record;
// false for every other kind (tprof does not export them). Times are taken as they are: the
// library has CUPTI stamp them with CLOCK_MONOTONIC. A kernel's occupancy comes from `devices`.
bool convert_activity(const CUpti_Activity& record, const CorrelationThreads& threads, const Devices& devices,
                      device_activity& out);

}  // namespace tprof::cupti
