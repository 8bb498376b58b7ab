// The files a recording writes and their names: torch.profiler's trace names, the Execution
// Trace beside them, created new before anything is attached.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "exporters/output_file.h"
#include "userspace/session/attach_session.h"
#include "userspace/session/target_process.h"

namespace tprof {

// This machine's name, as the default trace names and the trace metadata carry it.
std::string host_name();

// The process's rank in a distributed job, as torchrun and torch.distributed set it; -1: none.
int64_t rank_of(const TargetProcess& target);

// torch.profiler.tensorboard_trace_handler's "<worker>.<span>.pt.trace.json", the worker being
// "<host>_<pid>", and "_rank<R>" after it for a rank of a distributed job, in `directory`.
std::string default_output_path(const std::string& directory, const TargetProcess& target, uint64_t unix_ns);
std::string default_output_path(const std::string& directory, pid_t pid, int64_t rank, uint64_t unix_ns);

// Where the Execution Trace goes by default: "execution_trace/<stem>.et.json[.gz]" beside the
// trace.
std::string default_execution_trace_path(const std::string& trace_path);

// A trace and, unless --no-et, its Execution Trace, created new at once.
struct TraceFiles {
  TraceFiles(const std::string& trace_path, const AttachOptions& options);

  exporters::OutputFile trace;
  std::optional<exporters::OutputFile> execution_trace;
};

// The files a session writes, created before anything is attached so that an unwritable
// destination fails at once. With --schedule each cycle makes its own trace files as it begins
// (ScheduledSink), so only the directory is checked now.
struct OutputFiles {
  OutputFiles(const AttachOptions& options, const TargetProcess& target);

  std::optional<TraceFiles> whole;  // none with --schedule
  std::optional<exporters::OutputFile> stacks;
  std::optional<exporters::OutputFile> memory_stacks;    // --memory-stacks
  std::optional<exporters::OutputFile> memory_timeline;  // --memory-timeline
};

}  // namespace tprof
