#include "userspace/cli/unknown_values.h"

#include <algorithm>
#include <vector>

#include "op_arguments.h"

namespace tprof {
namespace {

void count_unknown(const std::vector<model::Value>& values, const std::string& op, bool is_return,
                   std::map<std::tuple<std::string, bool, size_t, std::string>, uint64_t>& counts, uint64_t& total) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (model::is_known(values[i])) continue;
    ++counts[{op, is_return, i, values[i].schema_type}];
    ++total;
  }
}

}  // namespace

void UnknownValuesSink::op(const model::ClosedOp& closed) {
  if (!closed.span.arguments_recorded) return;
  count_unknown(closed.span.inputs, closed.op.name, false, counts_, total_);
  count_unknown(closed.span.outputs, closed.op.name, true, counts_, total_);
}

std::string UnknownValuesSink::describe(size_t limit) const {
  if (total_ == 0) return "";
  using Entry = std::pair<std::tuple<std::string, bool, size_t, std::string>, uint64_t>;
  std::vector<Entry> entries(counts_.begin(), counts_.end());
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.second > b.second; });
  std::string text = std::to_string(total_) + " values of " + std::to_string(entries.size()) +
                     " arguments could not be read in full (unknown, or lists cut short: only their first "
                     "elements are written, at most " + std::to_string(LIST_ELEMENTS_MAX) + "): ";
  for (size_t i = 0; i < entries.size() && i < limit; ++i) {
    const auto& [op, is_return, index, type] = entries[i].first;
    text += (i > 0 ? ", " : "") + op + (is_return ? " return " : " input ") + std::to_string(index);
    if (!type.empty()) text += " (" + type + ")";
    text += " x" + std::to_string(entries[i].second);
  }
  if (entries.size() > limit) text += ", ...";
  return text;
}

}  // namespace tprof
