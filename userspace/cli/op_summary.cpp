#include "userspace/cli/op_summary.h"

#include <algorithm>

namespace tprof {

void OperatorTotalsSink::op(const model::ClosedOp& closed) {
  const model::OpSpan& span = closed.span;
  const uint64_t duration = span.end_ns - std::min(span.start_ns, span.end_ns);
  uint64_t children_ns = 0;
  if (const auto children = children_ns_.find(span.record_id); children != children_ns_.end()) {
    children_ns = children->second;
    children_ns_.erase(children);
  }
  OperatorTotals& totals = by_name_[closed.op.name];
  ++totals.calls;
  totals.total_ns += duration;
  totals.self_ns += duration - std::min(duration, children_ns);
  if (span.parent_record_id != 0) children_ns_[span.parent_record_id] += duration;
}

std::vector<OperatorTotals> OperatorTotalsSink::top_by_self_time(size_t limit) const {
  std::vector<OperatorTotals> rows;
  for (const auto& [name, totals] : by_name_) {
    rows.push_back(totals);
    rows.back().name = name;
  }
  std::sort(rows.begin(), rows.end(), [](const OperatorTotals& a, const OperatorTotals& b) {
    return a.self_ns != b.self_ns ? a.self_ns > b.self_ns : a.name < b.name;
  });
  if (rows.size() > limit) rows.resize(limit);
  return rows;
}

}  // namespace tprof
