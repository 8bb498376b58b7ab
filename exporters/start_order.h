// The order both exporters merge their per-thread streams in: by start time; at equal start
// the longer range (the enclosing one) first; then by stream position, which the caller
// chooses so that an enclosing kind (an annotation, a python span) precedes what it covers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tprof::exporters {

struct StartOrderKey {
  uint64_t start_ns;
  uint64_t end_ns;
  size_t stream_position;

  // "Comes later", for std::priority_queue, whose top is its greatest element.
  bool operator>(const StartOrderKey& other) const {
    if (start_ns != other.start_ns) return start_ns > other.start_ns;
    if (end_ns != other.end_ns) return end_ns < other.end_ns;
    return stream_position > other.stream_position;
  }
};

}  // namespace tprof::exporters
