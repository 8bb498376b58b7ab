// Per-operator totals over a trace, for the end-of-run console table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/trace_model.h"

namespace tprof {

struct OperatorTotals {
  std::string name;
  uint64_t calls = 0;
  uint64_t self_ns = 0;   // time in the op minus time in the ops it called
  uint64_t total_ns = 0;
};

// Sorted by self time, largest first; at most `limit` entries.
std::vector<OperatorTotals> top_operators_by_self_time(const model::Trace& trace, size_t limit);

}  // namespace tprof
