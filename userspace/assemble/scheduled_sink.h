// --schedule: torch.profiler's schedule with tensorboard_trace_handler, from outside. Ranges
// arrive from the closer stamped with the step they ran in (OpSpan::step); this sink passes on
// those of recording steps only, to the sinks of the cycle they belong to, and ends each cycle
// (its files written and renamed into place) once its last step has closed, as torch saves a
// cycle at RECORD_AND_SAVE. Ranges of no numbered step (model::OpSpan::kNoStep) are in no
// cycle, and a cycle that ends without a whole step is not kept. Python spans, flows, GPU
// activity and [memory] events go to the cycle open when they arrive, python spans cut to begin
// with it. It holds one cycle's sinks and the thread list.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/trace_sink.h"
#include "userspace/assemble/step_schedule.h"

namespace tprof {

class ScheduledSink final : public model::TraceSink {
 public:
  // One cycle's output: its own sinks and files.
  class Cycle {
   public:
    virtual ~Cycle() = default;
    virtual model::TraceSink& sink() = 0;
    virtual void commit() = 0;           // after finish(): the files take their final names
    virtual std::string written() const = 0;  // "a.pt.trace.json and execution_trace/a.et.json"
    virtual void remove() = 0;           // after commit(): its files are deleted (--max-files)
  };
  // Makes the next cycle's output when its first range arrives.
  using CycleFactory = std::function<std::unique_ptr<Cycle>()>;
  // The end-of-run facts as they stand, for a cycle from `cycle_start_unix_ns` that ends while
  // recording goes on; at the stop, its memory summary (--memory: what earlier cycles left live).
  using SummarySoFar = std::function<model::RunSummary(uint64_t cycle_start_unix_ns, uint64_t cycle_end_unix_ns)>;
  // `every_cycle` (the table, folded stacks) sees what every cycle sees, and the session's
  // begin and finish. `max_cycles_kept` (--max-files; 0: all): once a cycle is written, the
  // files of the cycles older than that many are removed, so that a schedule repeating until
  // stopped keeps a bounded disk.
  // `whole_cycles_only` (--max-overhead): a cycle is kept only with all its active steps, as a
  // window of ops may open after a cycle's first step began (it then waits for the next cycle)
  // or close before its last (overdrawn); except the one the stop cuts, kept as torch keeps it.
  ScheduledSink(StepSchedule schedule, CycleFactory make_cycle, SummarySoFar summary_so_far,
                model::TraceSink& every_cycle, size_t max_cycles_kept = 0, bool whole_cycles_only = false);

  void begin(const model::SessionInfo& session) override;
  void thread(const model::ThreadInfo& thread) override;
  void op(const model::ClosedOp& op) override;
  void python_span(uint32_t tid, const model::PythonSpan& span) override;
  void flow(const model::ForwardBackwardFlow& flow) override;
  void device_activity(const model::DeviceActivity& activity) override;
  void device_properties(const model::DeviceProperties& device) override;
  void memory(const model::MemoryEvent& event) override;
  void flush() override;
  void finish(const model::RunSummary& summary) override;

  // What each cycle still on disk wrote, oldest first; and how many were removed.
  const std::deque<std::string>& written() const { return written_; }
  uint64_t cycles_removed() const { return cycles_removed_; }
  // Cycles ended without a whole step (a part cut off), or without all their steps where
  // whole_cycles_only, whose files were removed at once.
  uint64_t cycles_not_kept() const { return cycles_not_kept_; }
  // The schedule's last cycle (repeat=R) has been written: nothing more will be kept.
  bool done() const { return last_ended_ && schedule_.finished_after(*last_ended_ + 1); }

 private:
  struct OpenCycle {
    uint64_t index = 0;
    uint64_t start_unix_ns = 0;  // python spans are cut to begin here
    std::unique_ptr<Cycle> output;
    uint64_t whole_steps = 0;    // ProfilerStep ranges passed on
  };
  bool keeps_step(uint64_t step) const;
  model::TraceSink* cycle_sink_for(uint64_t step, uint64_t start_unix_ns);
  void end_cycle(const model::RunSummary& summary, bool at_stop = false);

  StepSchedule schedule_;
  CycleFactory make_cycle_;
  SummarySoFar summary_so_far_;
  model::TraceSink& every_cycle_;
  model::SessionInfo session_;
  std::vector<model::ThreadInfo> threads_;
  std::vector<model::DeviceProperties> devices_;
  std::optional<OpenCycle> cycle_;
  const size_t max_cycles_kept_;
  const bool whole_cycles_only_;
  std::deque<std::unique_ptr<Cycle>> kept_;  // written, on disk; with --max-files only
  std::deque<std::string> written_;
  uint64_t cycles_removed_ = 0;
  uint64_t cycles_not_kept_ = 0;
  std::optional<uint64_t> last_ended_;  // the index of the last cycle written
};

}  // namespace tprof
