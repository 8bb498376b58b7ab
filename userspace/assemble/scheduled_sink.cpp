#include "userspace/assemble/scheduled_sink.h"

#include <algorithm>

namespace tprof {
namespace {

bool is_step_range(const model::ClosedOp& op) {
  return op.op.kind == model::RangeKind::kUserAnnotation && op.op.name.starts_with("ProfilerStep#");
}

}  // namespace

ScheduledSink::ScheduledSink(StepSchedule schedule, CycleFactory make_cycle, SummarySoFar summary_so_far,
                             model::TraceSink& every_cycle, size_t max_cycles_kept, bool whole_cycles_only)
    : schedule_(schedule),
      make_cycle_(std::move(make_cycle)),
      summary_so_far_(std::move(summary_so_far)),
      every_cycle_(every_cycle),
      max_cycles_kept_(max_cycles_kept),
      whole_cycles_only_(whole_cycles_only) {}

void ScheduledSink::begin(const model::SessionInfo& session) {
  session_ = session;
  every_cycle_.begin(session);
}

void ScheduledSink::thread(const model::ThreadInfo& thread) {
  threads_.push_back(thread);
  every_cycle_.thread(thread);
  if (cycle_) cycle_->output->sink().thread(thread);
}

bool ScheduledSink::keeps_step(uint64_t step) const {
  return step != model::OpSpan::kNoStep && schedule_.records(step);
}

// The sink of the cycle `step` belongs to, begun now if it is a later one than the open cycle
// (which then ends); null for a step that does not record, or one of a cycle already ended
// (a late range).
model::TraceSink* ScheduledSink::cycle_sink_for(uint64_t step, uint64_t start_unix_ns) {
  if (!keeps_step(step)) return nullptr;
  const uint64_t index = schedule_.cycle(step);
  if ((last_ended_ && index <= *last_ended_) || (cycle_ && index < cycle_->index)) return nullptr;
  if (cycle_ && index > cycle_->index) end_cycle(summary_so_far_(cycle_->start_unix_ns, start_unix_ns));
  if (!cycle_) {
    cycle_.emplace(OpenCycle{index, start_unix_ns, make_cycle_()});
    model::SessionInfo session = session_;
    session.window_start_unix_ns = start_unix_ns;
    model::TraceSink& sink = cycle_->output->sink();
    sink.begin(session);
    for (const model::ThreadInfo& thread : threads_) sink.thread(thread);
    for (const model::DeviceProperties& device : devices_) sink.device_properties(device);
  }
  cycle_->start_unix_ns = std::min(cycle_->start_unix_ns, start_unix_ns);
  return &cycle_->output->sink();
}

void ScheduledSink::op(const model::ClosedOp& op) {
  model::TraceSink* sink = cycle_sink_for(op.span.step, op.span.start_ns);
  if (!sink) return;
  sink->op(op);
  every_cycle_.op(op);
  if (!is_step_range(op)) return;
  ++cycle_->whole_steps;
  if (schedule_.action(op.span.step) == StepSchedule::Action::kRecordAndSave) end_cycle(summary_so_far_(cycle_->start_unix_ns, op.span.end_ns));
}

void ScheduledSink::python_span(uint32_t tid, const model::PythonSpan& span) {
  if (!cycle_ || span.end_ns <= cycle_->start_unix_ns) return;
  model::PythonSpan cut = span;
  cut.start_ns = std::max(span.start_ns, cycle_->start_unix_ns);
  cycle_->output->sink().python_span(tid, cut);
  every_cycle_.python_span(tid, cut);
}

void ScheduledSink::flow(const model::ForwardBackwardFlow& flow) {
  if (!cycle_ || flow.forward_start_ns < cycle_->start_unix_ns) return;
  cycle_->output->sink().flow(flow);
  every_cycle_.flow(flow);
}

void ScheduledSink::device_activity(const model::DeviceActivity& activity) {
  if (!cycle_) return;
  cycle_->output->sink().device_activity(activity);
  every_cycle_.device_activity(activity);
}

void ScheduledSink::memory(const model::MemoryEvent& event) {
  every_cycle_.memory(event);
  if (cycle_) cycle_->output->sink().memory(event);
}

void ScheduledSink::device_properties(const model::DeviceProperties& device) {
  devices_.push_back(device);
  every_cycle_.device_properties(device);
  if (cycle_) cycle_->output->sink().device_properties(device);
}

void ScheduledSink::flush() {
  if (cycle_) cycle_->output->sink().flush();
  every_cycle_.flush();
}

// A cycle cut short by the stop is written too, as torch writes the one recording when its
// profiler exits, if it holds a whole step (see end_cycle).
void ScheduledSink::finish(const model::RunSummary& summary) {
  if (cycle_) {
    model::RunSummary cycle_summary = summary;
    cycle_summary.memory = summary_so_far_(cycle_->start_unix_ns, summary.window_end_unix_ns).memory;
    end_cycle(cycle_summary, /*at_stop=*/true);
  }
  every_cycle_.finish(summary);
}

// A cycle that holds no whole step (only the part of one that a window of ops or the stop cut
// off) is no trace of the schedule's steps: its files go, and it takes no place of --max-files.
void ScheduledSink::end_cycle(const model::RunSummary& summary, bool at_stop) {
  cycle_->output->sink().finish(summary);
  cycle_->output->commit();
  last_ended_ = cycle_->index;
  const bool missing_steps = whole_cycles_only_ && !at_stop && cycle_->whole_steps < schedule_.active;
  if (cycle_->whole_steps == 0 || missing_steps) {
    cycle_->output->remove();
    ++cycles_not_kept_;
    cycle_.reset();
    return;
  }
  written_.push_back(cycle_->output->written());
  if (max_cycles_kept_ > 0) kept_.push_back(std::move(cycle_->output));
  cycle_.reset();
  while (max_cycles_kept_ > 0 && kept_.size() > max_cycles_kept_) {
    kept_.front()->remove();
    kept_.pop_front();
    written_.pop_front();
    ++cycles_removed_;
  }
}

}  // namespace tprof
