#include "userspace/op_summary.h"

#include <algorithm>
#include <unordered_map>

namespace tprof {

std::vector<OperatorTotals> top_operators_by_self_time(const model::Trace& trace, size_t limit) {
  // Totals by operator name: overloads (add.Tensor, add.Scalar) share one row, as in
  // torch.profiler's key_averages().
  std::unordered_map<std::string, OperatorTotals> by_name;
  for (const model::ThreadTrack& thread : trace.threads) {
    // Spans are in start order with parents first; `depth` says how many of the open
    // spans enclose the next one.
    struct Open {
      const model::OpSpan* span;
      uint64_t children_ns;
    };
    std::vector<Open> open;
    auto close_down_to = [&](size_t depth) {
      while (open.size() > depth) {
        const Open done = open.back();
        open.pop_back();
        const uint64_t duration = done.span->end_ns - done.span->start_ns;
        OperatorTotals& totals = by_name[trace.operators[done.span->operator_index].name];
        ++totals.calls;
        totals.total_ns += duration;
        totals.self_ns += duration - std::min(duration, done.children_ns);
        if (!open.empty()) open.back().children_ns += duration;
      }
    };
    for (const model::OpSpan& span : thread.spans) {
      close_down_to(span.depth);
      open.push_back({&span, 0});
    }
    close_down_to(0);
  }
  std::vector<OperatorTotals> rows;
  for (auto& [name, totals] : by_name) {
    totals.name = name;
    rows.push_back(std::move(totals));
  }
  std::sort(rows.begin(), rows.end(), [](const OperatorTotals& a, const OperatorTotals& b) {
    return a.self_ns != b.self_ns ? a.self_ns > b.self_ns : a.name < b.name;
  });
  if (rows.size() > limit) rows.resize(limit);
  return rows;
}

}  // namespace tprof
