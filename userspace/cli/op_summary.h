// Per-operator totals, gathered as ranges close, for the end-of-run console table.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/trace_sink.h"

namespace tprof {

struct OperatorTotals {
  std::string name;
  uint64_t calls = 0;
  uint64_t self_ns = 0;   // time in the op minus time in the ranges it encloses
  uint64_t total_ns = 0;
};

// Totals by operator name: overloads (add.Tensor, add.Scalar) share one row, as in
// torch.profiler's key_averages(). A range's children close before it does, so their time is
// waiting for it, keyed by its record id, when it closes.
class OperatorTotalsSink final : public model::TraceSink {
 public:
  void begin(const model::SessionInfo&) override {}
  void thread(const model::ThreadInfo&) override {}
  void op(const model::ClosedOp& op) override;
  void python_span(uint32_t, const model::PythonSpan&) override {}
  void flow(const model::ForwardBackwardFlow&) override {}
  void finish(const model::RunSummary&) override {}

  // Sorted by self time, largest first; at most `limit` entries.
  std::vector<OperatorTotals> top_by_self_time(size_t limit) const;

 private:
  std::unordered_map<std::string, OperatorTotals> by_name_;
  std::unordered_map<uint64_t, uint64_t> children_ns_;  // by the enclosing range's record id
};

}  // namespace tprof
