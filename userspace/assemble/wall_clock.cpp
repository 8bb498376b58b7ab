#include "userspace/assemble/wall_clock.h"

#include <time.h>

#include <limits>

namespace tprof {
namespace {

uint64_t read_clock(clockid_t clock) {
  timespec ts{};
  ::clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

uint64_t monotonic_now_ns() { return read_clock(CLOCK_MONOTONIC); }
uint64_t unix_now_ns() { return read_clock(CLOCK_REALTIME); }

MonotonicToUnix MonotonicToUnix::calibrate() {
  uint64_t best_gap = std::numeric_limits<uint64_t>::max();
  int64_t best_offset = 0;
  for (int i = 0; i < 16; ++i) {
    const uint64_t before = monotonic_now_ns();
    const uint64_t wall = unix_now_ns();
    const uint64_t after = monotonic_now_ns();
    if (after - before < best_gap) {
      best_gap = after - before;
      best_offset = static_cast<int64_t>(wall) - static_cast<int64_t>(before + (after - before) / 2);
    }
  }
  return MonotonicToUnix(best_offset);
}

}  // namespace tprof
