// `tprof attach`: from a pid to a written trace. Owns the order of the steps: every check
// that can fail cheaply (process, privileges, kernel, library, output path) runs before any
// probe is attached, and whatever was recorded is written out even if recording fails.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>

namespace tprof {

struct AttachOptions {
  pid_t pid = 0;
  std::optional<double> duration_s;  // none: until Ctrl-C or target exit
  std::string output_path;           // empty: <hostname>_<pid>.<unix_ns>.pt.trace.json
  bool execution_trace = true;        // --no-et turns the Execution Trace off
  std::string execution_trace_path;   // empty: beside the trace, <stem>.et.json[.gz]
  mode_t output_mode = 0600;          // --mode: permission bits of the files written
  size_t ring_buffer_bytes = 64u << 20;
  bool python_stacks = true;          // --no-python turns stacks and python_function spans off
  uint32_t sample_hz = 1000;          // the stack sampler's rate per CPU
  bool record_shapes = true;          // --no-shapes: ops without their inputs and outputs
  bool quiet = false;
};

// Returns the process exit status. Throws tprof::Error for failures before recording.
int run_attach(const AttachOptions& options);

}  // namespace tprof
