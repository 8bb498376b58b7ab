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

// CUPTI stamps records with the clock the library registers, Kineto's (a TSC: ticks, not ns),
// since CUPTI keeps one per process and the target's own torch.profiler relies on it. Maps that
// clock to CLOCK_MONOTONIC (BPF's) from readings of both taken side by side: the latest reading
// gives the offset, and the rate comes from it and an earlier one between 10 ms and about 10 s
// before it (1 until there is one). A clock that goes back (another source) starts the map
// afresh.
class ClockMap {
 public:
  void add_reading(uint64_t cupti_time, uint64_t monotonic_ns);
  uint64_t to_monotonic(uint64_t cupti_time) const;  // as it is, before any reading

 private:
  struct Reading {
    bool valid = false;
    uint64_t cupti_time = 0;
    uint64_t monotonic_ns = 0;
  };
  static double rate_between(const Reading& earlier, const Reading& later);
  Reading first_;
  Reading latest_;
  double rate_ = 1.0;  // monotonic ns per CUPTI tick
};

// Fills `out` for a kernel, memcpy, memset, runtime or driver call, or synchronization record;
// false for every other kind (tprof does not export them). Times go through `clock`. An API
// call's thread is CUPTI's id for it. A kernel's occupancy comes from `devices`.
bool convert_activity(const CUpti_Activity& record, const ClockMap& clock, const Devices& devices,
                      device_activity& out);

}  // namespace tprof::cupti
