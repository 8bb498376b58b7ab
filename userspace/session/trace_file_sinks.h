// The writers of one set of trace files (a Chrome trace and, unless --no-et, its Execution
// Trace) as one sink, and the files of a recording that recorded nothing.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "exporters/chrome_trace_writer.h"
#include "exporters/execution_trace_writer.h"
#include "model/trace_sink.h"
#include "userspace/session/attach_session.h"
#include "userspace/session/output_files.h"

namespace tprof {

// The Chrome trace and Execution Trace writers of one set of trace files.
class TraceFileSinks {
 public:
  explicit TraceFileSinks(TraceFiles& files)
      : files_(files), chrome_(files.trace, exporters::chrome_trace_name(files.trace.path())) {
    std::vector<model::TraceSink*> sinks{&chrome_};
    if (files.execution_trace) {
      execution_trace_.emplace(*files.execution_trace);
      sinks.push_back(&*execution_trace_);
    }
    fan_out_.emplace(std::move(sinks));
  }

  model::TraceSink& sink() { return *fan_out_; }

  void commit() {
    files_.trace.commit();
    if (files_.execution_trace) files_.execution_trace->commit();
  }

  std::string written() const {
    return files_.trace.path() + (files_.execution_trace ? " and " + files_.execution_trace->path() : "");
  }

 private:
  TraceFiles& files_;
  exporters::ChromeTraceWriter chrome_;
  std::optional<exporters::ExecutionTraceWriter> execution_trace_;
  std::optional<model::FanOutSink> fan_out_;
};

// `tprof record` of a command that ended before it loaded torch: a valid trace without events
// (and its ET), so that whatever reads the files finds them. Returns what was written.
std::string write_empty_recording(const AttachOptions& options, pid_t pid);

}  // namespace tprof
