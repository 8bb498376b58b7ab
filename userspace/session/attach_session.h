// `tprof attach`: from pids to written traces, one per process: the targets named, matched or
// born to them (--children), recorded at once until a stop signal, --duration, or the exit
// of every target. Whatever was recorded is written out even if recording fails.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "userspace/assemble/step_schedule.h"
#include "userspace/cli/op_summary.h"
#include "userspace/session/op_selection.h"

namespace tprof {

struct AttachOptions {
  std::vector<pid_t> pids;           // the targets named on the command line
  std::string match;                 // --match: also every process whose command line matches
  bool follow_children = false;      // --children: also the targets' children, once they load torch
  bool follow = false;               // record --follow: every process the command starts, held at torch's load
  std::string output_directory;      // where default-named files go ("": the current directory)
  std::optional<double> duration_s;  // none: until Ctrl-C or target exit
  // --start-at: the unix time (s) the window opens, agreed among tprof instances on several
  // nodes; attached before it, recording from it. none: at once.
  std::optional<double> start_at_unix_s;
  std::string output_path;           // one target only; empty: <host>_<pid>[_rank<R>].<unix_ns>.pt.trace.json
  bool execution_trace = true;        // --no-et turns the Execution Trace off
  std::string execution_trace_path;   // empty: execution_trace/<stem>.et.json[.gz] beside the trace
  std::string stacks_path;           // --stacks: folded stacks for flame graphs; empty: none
  bool memory = false;               // --memory: the CPU allocator's blocks, as profile_memory=True
  std::string memory_stacks_path;    // --memory-stacks: the peak's blocks as folded stacks; empty: none
  std::string memory_timeline_path;  // --memory-timeline: bytes over time by category; empty: none
  mode_t output_mode = 0600;          // --mode: permission bits of the files written
  bool replace_existing = false;      // --force: an existing regular file at an output path is replaced
  size_t ring_buffer_bytes = 64u << 20;
  bool python_stacks = true;          // --no-python turns stacks and python_function spans off
  uint32_t sample_hz = 1000;          // the stack sampler's rate per CPU
  bool record_shapes = true;          // --no-shapes: ops without their inputs and outputs
  OpSelection op_selection;           // --ops, --skip-ops, --no-view-ops: which ops are probed
  bool plan_cache = true;            // --no-plan-cache: plan libtorch_cpu anew, keep no plan on disk
  // --schedule: keep only the steps torch.profiler.schedule would record, and write each cycle
  // into output_directory as tensorboard_trace_handler would; none: one trace of everything.
  std::optional<StepSchedule> schedule;
  // --max-files: with --schedule, the files of only the last this many cycles stay on disk;
  // 0: all of them.
  size_t max_files = 0;
  // --step-function [MODULE:]NAME: a step is a call of that Python function; empty: each
  // Optimizer.step ends one.
  std::string step_function;
  // --max-overhead: the target's slowdown the probes may cost, as a fraction (0.05: 5%); the
  // per-op probes are then in only for windows that keep the estimate within it. none: always.
  std::optional<double> max_overhead;
  bool quiet = false;
  // Monotonic: when tprof started, which a target's `attached` line counts from; 0: from when
  // its planning began (a target found later, `tprof record`'s).
  uint64_t started_ns = 0;
  SummaryOptions summary;            // the table printed at the end
};

// Returns the process exit status. Throws tprof::Error for failures before recording.
int run_attach(const AttachOptions& options);

// Several targets write several sets of files, which only default names tell apart: throws
// tprof::Error if the options name files.
void require_default_names_for_several(const AttachOptions& options);
// --max-overhead is for one target: throws tprof::Error when it is set.
void require_one_target_for_max_overhead(const AttachOptions& options);

class ProcessHolder;

// `tprof record`: records what `holder` holds at torch's load, the command it launched (and
// with --follow the processes it starts), until the command has ended and every target with it,
// or a second stop signal (the first is the command's). Returns once the command has ended,
// with its status. Throws tprof::Error if recording failed (the files are written).
int run_record(const AttachOptions& options, ProcessHolder& holder, const std::string& command_name);

}  // namespace tprof
