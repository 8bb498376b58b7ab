#include "userspace/cli/report.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "userspace/cli/error.h"

namespace tprof {
namespace {

using nlohmann::json;

// The whole file, inflated if it is gzip (zlib reads plain files through too).
std::string read_text(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw Error(errno_message("cannot open " + path, errno));
  std::string text;
  char buffer[1 << 16];
  int read = 0;
  while ((read = gzread(file, buffer, sizeof(buffer))) > 0) text.append(buffer, static_cast<size_t>(read));
  const bool failed = read < 0;
  gzclose(file);
  if (failed) throw Error("cannot read " + path + ": not a readable gzip or text file");
  return text;
}

// "Input Dims" as tprof writes it: "[[4, 8], [8, 3]]".
std::string dims_text(const json& value) {
  if (!value.is_array()) return value.dump();
  std::string text = "[";
  for (size_t i = 0; i < value.size(); ++i) {
    if (i > 0) text += ", ";
    text += dims_text(value[i]);
  }
  return text + "]";
}

struct Range {
  int64_t start_ns;
  int64_t end_ns;
  std::string name;
  std::string shapes;
  uint64_t flops = 0;  // the event's "flops" arg, where the writer estimated them
  uint64_t children_ns = 0;
};

int64_t to_ns(const json& microseconds) { return std::llround(microseconds.get<double>() * 1000.0); }

// One thread's ranges, by start and outermost first, into the table: each one's direct
// children are the ranges that start inside it while it is the innermost open one.
void add_thread(std::vector<Range>& ranges, OperatorTotalsTable& table) {
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return std::tie(a.start_ns, b.end_ns) < std::tie(b.start_ns, a.end_ns);
  });
  std::vector<Range*> open;
  const auto close = [&](Range& range) {
    const auto duration = static_cast<uint64_t>(std::max<int64_t>(range.end_ns - range.start_ns, 0));
    table.add(range.name, range.shapes, duration - std::min(duration, range.children_ns), duration, range.flops);
  };
  for (Range& range : ranges) {
    while (!open.empty() && open.back()->end_ns <= range.start_ns) {
      close(*open.back());
      open.pop_back();
    }
    if (!open.empty())
      open.back()->children_ns += static_cast<uint64_t>(std::max<int64_t>(range.end_ns - range.start_ns, 0));
    open.push_back(&range);
  }
  for (auto range = open.rbegin(); range != open.rend(); ++range) close(**range);
}

}  // namespace

OperatorTotalsTable totals_from_trace(const std::string& path, bool group_by_shape) {
  const json trace = json::parse(read_text(path), nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded() || !trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    throw Error(path + " is not a Chrome trace (a JSON object with traceEvents)");
  std::map<std::pair<std::string, std::string>, std::vector<Range>> threads;  // by (pid, tid) as text
  for (const json& event : trace["traceEvents"]) {
    if (!event.is_object() || event.value("ph", "") != "X") continue;
    const std::string category = event.value("cat", "");
    if (category != "cpu_op" && category != "user_annotation") continue;
    if (!event.contains("ts") || !event.contains("dur") || !event["ts"].is_number() || !event["dur"].is_number()) continue;
    const int64_t start_ns = to_ns(event["ts"]);
    Range range{start_ns, start_ns + to_ns(event["dur"]), event.value("name", ""), "", 0, 0};
    if (event.contains("args") && event["args"].contains("flops") && event["args"]["flops"].is_number_unsigned())
      range.flops = event["args"]["flops"].get<uint64_t>();
    if (group_by_shape) {
      // Ranges without inputs (annotations) group under "[]", as torch's empty input_shapes.
      const bool has_dims = event.contains("args") && event["args"].contains("Input Dims");
      range.shapes = has_dims ? dims_text(event["args"]["Input Dims"]) : "[]";
    }
    threads[{event.value("pid", json()).dump(), event.value("tid", json()).dump()}].push_back(std::move(range));
  }
  OperatorTotalsTable table(group_by_shape);
  for (auto& [thread, ranges] : threads) add_thread(ranges, table);
  return table;
}

}  // namespace tprof
