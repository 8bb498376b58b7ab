// --memory-timeline: the CPU's allocated bytes over time by category, as torch.profiler's
// export_memory_timeline writes them (torch/profiler/_memory_profiler.py): a JSON array
// [times, sizes], times in microseconds, sizes one row per time holding, after a leading 0, the
// bytes of each category in torch's order: parameter, optimizer state, input, temporary,
// activation, gradient, autograd detail, unknown. Or, to a .html path, a page that plots them
// as stacked areas with Chart.js inlined (exporters/chart_js.h): the peak marked, and hovering
// a time shows the op and the Python line of the event there.
//
// Categories are found as torch's MemoryProfile finds them (exporters/memory_categories.h);
// what the evidence does not tell is unknown.
//
// Bounded: MemoryCategories keeps at most its kMax* events, nodes and tensor uses; past a bound
// the timeline stops there, and events_left_out() says how much was left out.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporters/memory_categories.h"
#include "exporters/output_file.h"
#include "model/trace_sink.h"

namespace tprof::exporters {

class MemoryTimelineWriter final : public model::TraceSink {
 public:
  static constexpr size_t kCategoryCount = kMemoryCategoryCount;
  // Points an HTML plot holds at most: a longer timeline is thinned, its peak kept.
  static constexpr size_t kMaxPlotPoints = 20'000;
  static constexpr size_t kMaxLabels = 100'000;  // distinct "op at frame" texts kept for hovering

  // `html`: a page with the plot rather than torch's JSON.
  MemoryTimelineWriter(OutputFile& out, bool html) : out_(out), html_(html) {}

  void begin(const model::SessionInfo&) override {}
  void thread(const model::ThreadInfo&) override {}
  void op(const model::ClosedOp& op) override { categories_.op(op); }
  void python_span(uint32_t, const model::PythonSpan&) override {}
  void flow(const model::ForwardBackwardFlow&) override {}
  void memory(const model::MemoryEvent& event) override;
  void finish(const model::RunSummary& summary) override;

  // What the timeline left out for its bounds: memory events and ops (0: nothing).
  uint64_t events_left_out() const { return categories_.left_out(); }

 private:
  using Row = std::array<int64_t, kCategoryCount + 1>;  // torch's leading 0, then the categories
  struct Timeline {
    std::vector<uint64_t> times;
    std::vector<Row> rows;
    std::vector<uint32_t> labels;  // per row: its last event's
  };
  uint32_t label_of(const model::MemoryEvent& event);
  static Timeline coalesce(const std::vector<MemoryCategories::Change>& changes);
  void write_json(const Timeline& timeline);
  void write_html(const Timeline& timeline);

  OutputFile& out_;
  const bool html_;
  MemoryCategories categories_;
  std::vector<std::string> labels_{""};
  std::unordered_map<std::string, uint32_t> label_ids_;
};

}  // namespace tprof::exporters
