// --memory-timeline: the CPU's allocated bytes over time by category, as torch.profiler's
// export_memory_timeline writes them (torch/profiler/_memory_profiler.py): a JSON array
// [times, sizes], times in microseconds, sizes one row per time holding, after a leading 0, the
// bytes of each category in torch's order: parameter, optimizer state, input, temporary,
// activation, gradient, autograd detail, unknown. Or, to a .html path, a page that plots them
// as stacked areas with Chart.js inlined (exporters/chart_js.h): the peak marked, and hovering
// a time shows the op and the Python line of the event there.
//
// Categories come from what the ops did to each storage, found as torch's MemoryProfile finds
// them from the ops' inputs, and only where the evidence says so; every other block is unknown:
// - parameter: written in place inside an Optimizer.step range, and an input of some op
//   outside every Optimizer.step (the forward pass reads it);
// - optimizer state: written in place inside Optimizer.step, never used outside it;
// - gradient: read inside Optimizer.step, never written there nor used outside it.
// A storage seen as an op's tensor but never allocated while recording was there before (a
// model's parameters, its optimizer's state): it counts from the first time, at the size the
// ops showed it to have.
//
// Its inputs arrive as the closer hands them on: ranges as they close, so that what a range
// encloses comes first, and memory events as they happen. Facts of ranges inside an open
// top-level range wait, per thread, until an Optimizer.step range closes around them (at any
// depth: a step may run inside the user's own record_function), or the top-level range does.
// Bounded: at most kMaxEvents memory events and kMaxStorages storages are kept; past either the
// timeline stops there and says so.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "exporters/output_file.h"
#include "model/trace_sink.h"

namespace tprof::exporters {

class MemoryTimelineWriter final : public model::TraceSink {
 public:
  static constexpr size_t kMaxEvents = 4'000'000;     // 24 bytes each
  static constexpr size_t kMaxStorages = 1'000'000;   // ~100 bytes each over the sets
  // torch's categories, in its order (_CATEGORY_TO_INDEX); a row holds a leading 0, then these.
  enum Category : uint8_t {
    kParameter, kOptimizerState, kInput, kTemporary, kActivation, kGradient, kAutogradDetail, kUnknown,
    kCategoryCount
  };

  // Points an HTML plot holds at most: a longer timeline is thinned, its peak kept.
  static constexpr size_t kMaxPlotPoints = 20'000;
  static constexpr size_t kMaxLabels = 100'000;  // distinct "op at frame" texts kept for hovering
  // Facts of ranges closed inside a thread's open top-level range, waiting to learn whether an
  // Optimizer.step held them; past this they count as outside it.
  static constexpr size_t kMaxWaitingFacts = 1'000'000;

  // `html`: a page with the plot rather than torch's JSON.
  MemoryTimelineWriter(OutputFile& out, bool html) : out_(out), html_(html) {}

  void begin(const model::SessionInfo&) override {}
  void thread(const model::ThreadInfo&) override {}
  void op(const model::ClosedOp& op) override;
  void python_span(uint32_t, const model::PythonSpan&) override {}
  void flow(const model::ForwardBackwardFlow&) override {}
  void memory(const model::MemoryEvent& event) override;
  void finish(const model::RunSummary& summary) override;

  // What the timeline left out for its bounds (0: nothing).
  uint64_t events_left_out() const { return events_left_out_; }

 private:
  struct Event {
    uint64_t time_us;
    uint64_t address;
    int64_t bytes;
    uint32_t label;  // into labels_: what the event's op and line were; 0: none
  };
  using Row = std::array<int64_t, kCategoryCount + 1>;  // torch's leading 0, then the categories
  struct Timeline {
    std::vector<uint64_t> times;
    std::vector<Row> rows;
    std::vector<uint32_t> labels;  // per row: its last event's
  };
  // What one op did to storages: those it wrote in place, and those it read.
  struct OpFacts {
    uint64_t start_ns = 0;
    std::vector<uint64_t> written;
    std::vector<uint64_t> read;
  };
  uint32_t label_of(const model::MemoryEvent& event);
  Timeline coalesce() const;
  void write_json(const Timeline& timeline);
  void write_html(const Timeline& timeline);
  void note_sizes(const model::OpSpan& span);
  void settle(const OpFacts& facts, bool in_optimizer_step);
  Category category_of(uint64_t storage) const;

  OutputFile& out_;
  const bool html_;
  std::vector<Event> events_;
  std::vector<std::string> labels_{""};
  std::unordered_map<std::string, uint32_t> label_ids_;
  uint64_t events_left_out_ = 0;
  std::unordered_map<uint32_t, std::vector<OpFacts>> waiting_;  // per thread: inside an open top-level range
  std::unordered_set<uint64_t> written_in_step_, read_in_step_, used_outside_step_;
  std::unordered_map<uint64_t, int64_t> storage_bytes_;  // as the ops showed them
  std::unordered_set<uint64_t> allocated_;               // storages allocated while recording
};

}  // namespace tprof::exporters
