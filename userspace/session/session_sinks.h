// Where a recording's stream of spans goes: the trace files (one set, or one per --schedule
// cycle, the oldest removed past --max-files), the table's totals, the unknown values, the
// folded stacks, the peak memory's and the memory timeline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "exporters/folded_stacks_writer.h"
#include "exporters/memory_timeline_writer.h"
#include "model/trace_sink.h"
#include "userspace/assemble/scheduled_sink.h"
#include "userspace/cli/compile_summary.h"
#include "userspace/cli/op_summary.h"
#include "userspace/cli/unknown_values.h"
#include "userspace/session/attach_session.h"
#include "userspace/session/output_files.h"
#include "userspace/session/target_process.h"
#include "userspace/session/trace_file_sinks.h"

namespace tprof {

// One --schedule cycle's files, named as tensorboard_trace_handler names them, and their
// writers, which are let go once the files are written.
class CycleOutput final : public ScheduledSink::Cycle {
 public:
  CycleOutput(const std::string& trace_path, const AttachOptions& options);
  model::TraceSink& sink() override { return sinks_->sink(); }
  void commit() override;
  std::string written() const override { return written_; }
  void remove() override;

 private:
  std::optional<TraceFiles> files_;
  std::optional<TraceFileSinks> sinks_;
  std::string written_;
  std::vector<std::string> paths_;  // once committed
};

class SessionSinks {
 public:
  SessionSinks(OutputFiles& outputs, const AttachOptions& options, const TargetProcess& target,
               ScheduledSink::SummarySoFar summary_so_far);
  model::TraceSink& sink() { return scheduled_ ? static_cast<model::TraceSink&>(*scheduled_) : *fan_out_; }
  const OperatorTotalsSink& totals() const { return totals_; }
  const UnknownValuesSink& unknown_values() const { return unknown_values_; }
  const CompileSummarySink& compile_summary() const { return compile_summary_; }
  // --memory-timeline: the memory events it left out past its bound (0: none, or no timeline).
  uint64_t memory_timeline_left_out() const { return memory_timeline_ ? memory_timeline_->events_left_out() : 0; }
  // --schedule with repeat=R: the last cycle is written.
  bool schedule_done() const { return scheduled_ && scheduled_->done(); }

  // At most once per kFlushPeriodNs: what was handed on so far reaches the partial files.
  void flush_if_due(uint64_t now_ns);
  void commit();
  // "a.pt.trace.json and execution_trace/a.et.json", for the console.
  std::string written() const;

 private:
  static constexpr uint64_t kFlushPeriodNs = 1'000'000'000;

  OutputFiles& outputs_;
  std::optional<TraceFileSinks> whole_;
  std::optional<exporters::FoldedStacksWriter> stacks_;
  std::optional<exporters::MemoryStacksWriter> memory_stacks_;
  std::optional<exporters::MemoryTimelineWriter> memory_timeline_;
  OperatorTotalsSink totals_;
  UnknownValuesSink unknown_values_;
  CompileSummarySink compile_summary_;
  std::optional<model::FanOutSink> fan_out_;
  std::optional<ScheduledSink> scheduled_;
  uint64_t last_flush_ns_ = 0;
};

}  // namespace tprof
