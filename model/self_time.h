// Self time of ranges as the span closer hands them on: a range's children close before it
// does, so their time waits for it, keyed by its record id, until it closes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "model/trace_model.h"

namespace tprof::model {

class SelfTimes {
 public:
  struct Times {
    uint64_t total_ns;
    uint64_t self_ns;  // less its direct children's time
  };
  // `span` closed: its times, and its duration noted for its parent.
  Times close(const OpSpan& span) {
    const uint64_t duration_ns = span.end_ns - std::min(span.start_ns, span.end_ns);
    uint64_t children_ns = 0;
    if (const auto children = children_ns_.find(span.record_id); children != children_ns_.end()) {
      children_ns = children->second;
      children_ns_.erase(children);
    }
    if (span.parent_record_id != 0) children_ns_[span.parent_record_id] += duration_ns;
    return {duration_ns, duration_ns - std::min(duration_ns, children_ns)};
  }

 private:
  std::unordered_map<uint64_t, uint64_t> children_ns_;  // by the enclosing range's record id
};

}  // namespace tprof::model
