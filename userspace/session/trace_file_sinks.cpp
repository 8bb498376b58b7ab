#include "userspace/session/trace_file_sinks.h"

#include "userspace/assemble/wall_clock.h"

#ifndef TPROF_VERSION
#error "TPROF_VERSION must be defined by the build"
#endif

namespace tprof {

std::string write_empty_recording(const AttachOptions& options, pid_t pid) {
  const std::string path = options.output_path.empty()
                               ? default_output_path(options.output_directory, pid, -1, unix_now_ns())
                               : options.output_path;
  TraceFiles files(path, options);
  TraceFileSinks sinks(files);
  model::SessionInfo session;
  session.pid = static_cast<uint32_t>(pid);
  session.hostname = host_name();
  session.tprof_version = TPROF_VERSION;
  session.window_start_unix_ns = unix_now_ns();
  session.attach_unix_ns = session.window_start_unix_ns;
  sinks.sink().begin(session);
  model::RunSummary summary;
  summary.window_end_unix_ns = session.window_start_unix_ns;
  sinks.sink().finish(summary);
  sinks.commit();
  return sinks.written();
}

}  // namespace tprof
