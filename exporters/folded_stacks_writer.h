// Folded stacks, as torch.profiler's export_stacks writes them (profiler_util.py): for every
// range that ran with a Python stack, one line "outermost;...;innermost;op self_us", the frames
// as torch names them ("file(line): function") with spaces, semicolons, tabs and newlines made
// "_", weighted by the range's self time (its duration less its direct children's) in whole
// microseconds; ranges under 1 us are left out. flamegraph.pl and speedscope sum equal lines.
// Unlike export_stacks, the range's own name ends the stack, so that the flame graph shows
// which op the time went to. Lines are written as ranges close.
#pragma once

#include <string>
#include <string_view>

#include "exporters/output_file.h"
#include "model/self_time.h"
#include "model/trace_sink.h"

namespace tprof::exporters {

class FoldedStacksWriter final : public model::TraceSink {
 public:
  explicit FoldedStacksWriter(OutputFile& out) : out_(out) {}

  void begin(const model::SessionInfo&) override {}
  void thread(const model::ThreadInfo&) override {}
  void op(const model::ClosedOp& op) override;
  void python_span(uint32_t, const model::PythonSpan&) override {}
  void flow(const model::ForwardBackwardFlow&) override {}
  void flush() override { out_.flush(); }
  void finish(const model::RunSummary&) override {}

 private:
  OutputFile& out_;
  model::SelfTimes self_times_;
  std::string line_;
};

// --memory-stacks: the blocks live at the peak (model::MemorySummary::peak_holders) as folded
// stacks weighted by bytes, one line per place they were allocated: its Python frames, then the
// innermost range open there ("[no_op]" outside every range). Written at finish.
class MemoryStacksWriter final : public model::TraceSink {
 public:
  static constexpr std::string_view kNoRange = "[no_op]";
  explicit MemoryStacksWriter(OutputFile& out) : out_(out) {}

  void begin(const model::SessionInfo&) override {}
  void thread(const model::ThreadInfo&) override {}
  void op(const model::ClosedOp&) override {}
  void python_span(uint32_t, const model::PythonSpan&) override {}
  void flow(const model::ForwardBackwardFlow&) override {}
  void finish(const model::RunSummary& summary) override;

 private:
  OutputFile& out_;
};

}  // namespace tprof::exporters
