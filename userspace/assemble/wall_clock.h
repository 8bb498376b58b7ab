// BPF stamps records with CLOCK_MONOTONIC (bpf_ktime_get_ns); traces carry wall-clock Unix
// time so that they line up with other ranks and with CUPTI. The offset between the two is
// measured once, at attach.
#pragma once

#include <cstdint>

namespace tprof {

uint64_t monotonic_now_ns();
uint64_t unix_now_ns();

class MonotonicToUnix {
 public:
  // Samples both clocks several times and keeps the pair read closest together.
  static MonotonicToUnix calibrate();
  explicit MonotonicToUnix(int64_t unix_minus_monotonic_ns) : offset_ns_(unix_minus_monotonic_ns) {}

  uint64_t to_unix(uint64_t monotonic_ns) const { return static_cast<uint64_t>(static_cast<int64_t>(monotonic_ns) + offset_ns_); }

 private:
  int64_t offset_ns_;
};

}  // namespace tprof
