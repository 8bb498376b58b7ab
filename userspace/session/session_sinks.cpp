#include "userspace/session/session_sinks.h"

#include <unistd.h>

#include <vector>

#include "userspace/assemble/wall_clock.h"
#include "userspace/cli/console.h"

namespace tprof {

CycleOutput::CycleOutput(const std::string& trace_path, const AttachOptions& options) {
  files_.emplace(trace_path, options);
  sinks_.emplace(*files_);
}

void CycleOutput::commit() {
  sinks_->commit();
  written_ = sinks_->written();
  paths_.push_back(files_->trace.path());
  if (files_->execution_trace) paths_.push_back(files_->execution_trace->path());
  sinks_.reset();
  files_.reset();
}

// A file someone else removed or replaced meanwhile is no error: rotation only bounds the disk.
void CycleOutput::remove() {
  for (const std::string& path : paths_) ::unlink(path.c_str());
  paths_.clear();
}

SessionSinks::SessionSinks(OutputFiles& outputs, const AttachOptions& options, const TargetProcess& target,
                           ScheduledSink::SummarySoFar summary_so_far)
    : outputs_(outputs), totals_(options.summary.group_by_shape) {
  std::vector<model::TraceSink*> sinks{&totals_, &unknown_values_, &compile_summary_};
  if (outputs.stacks) {
    stacks_.emplace(*outputs.stacks);
    sinks.push_back(&*stacks_);
  }
  if (outputs.memory_stacks) {
    memory_stacks_.emplace(*outputs.memory_stacks);
    sinks.push_back(&*memory_stacks_);
  }
  if (outputs.memory_timeline) {
    memory_timeline_.emplace(*outputs.memory_timeline, options.memory_timeline_path.ends_with(".html"));
    sinks.push_back(&*memory_timeline_);
  }
  if (outputs.whole) {
    whole_.emplace(*outputs.whole);
    sinks.push_back(&whole_->sink());
  }
  fan_out_.emplace(std::move(sinks));
  if (!options.schedule) return;
  scheduled_.emplace(
      *options.schedule,
      [&options, &target] {
        return std::make_unique<CycleOutput>(default_output_path(options.output_directory, target, unix_now_ns()),
                                             options);
      },
      std::move(summary_so_far), *fan_out_, options.max_files, /*whole_cycles_only=*/options.max_overhead.has_value());
}

void SessionSinks::flush_if_due(uint64_t now_ns) {
  if (now_ns - last_flush_ns_ < kFlushPeriodNs) return;
  sink().flush();
  last_flush_ns_ = now_ns;
}

void SessionSinks::commit() {
  if (whole_) whole_->commit();
  if (outputs_.stacks) outputs_.stacks->commit();
  if (outputs_.memory_stacks) outputs_.memory_stacks->commit();
  if (outputs_.memory_timeline) outputs_.memory_timeline->commit();
}

std::string SessionSinks::written() const {
  std::vector<std::string> parts;
  if (whole_) parts.push_back(whole_->written());
  if (scheduled_) {
    for (const std::string& cycle : scheduled_->written()) parts.push_back(cycle);
    if (scheduled_->written().empty()) parts.push_back("no trace (no scheduled step was recorded)");
    if (scheduled_->cycles_removed() > 0)
      parts.back() += " (the last " + std::to_string(scheduled_->written().size()) + " cycles: " +
                      group_thousands(scheduled_->cycles_removed()) + " older ones removed for --max-files)";
    if (scheduled_->cycles_not_kept() > 0)
      parts.back() += "; " + group_thousands(scheduled_->cycles_not_kept()) +
                      " cycles without all their steps (cut off) were not kept";
  }
  if (outputs_.stacks) parts.push_back(outputs_.stacks->path());
  if (outputs_.memory_stacks) parts.push_back(outputs_.memory_stacks->path());
  if (outputs_.memory_timeline) parts.push_back(outputs_.memory_timeline->path());
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) text += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return text;
}

}  // namespace tprof
