// One target's recording, from its pid to its written files: every check that can fail cheaply
// (process, privileges, kernel, libraries, output path) runs in the constructor, before any
// probe is attached; start() attaches and begins the trace; the session's drains advance it;
// detach() ends its window, and finish() writes out whatever was recorded, even after a fault.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "userspace/assemble/wall_clock.h"
#include "userspace/cli/console.h"
#include "userspace/loader/trap_calibration.h"
#include "userspace/session/attach_session.h"
#include "userspace/session/recording_loop.h"
#include "userspace/session/session_tracer.h"
#include "userspace/session/target_process.h"
#include "userspace/session/torch_library_plan.h"

namespace tprof {

class TargetRecording {
 public:
  // Plans the probes (from the session's plan of its libtorch_cpu file, made by the first
  // target that maps it), opens the output files (options.output_path, or the default name) and
  // registers the target with the session's op tracer (loaded with the first). Throws
  // tprof::Error.
  TargetRecording(const AttachOptions& options, pid_t pid, SessionTracer& session, TorchLibraryPlans& library_plans,
                  const MonotonicToUnix& clock, Console& console);
  ~TargetRecording();
  TargetRecording(const TargetRecording&) = delete;
  TargetRecording& operator=(const TargetRecording&) = delete;

  // Attaches every probe and begins the trace; the window opens as attaching begins. Traces of
  // one session share `base_time_unix_ns` (rounded down as Kineto's base time), so that HTA
  // lines their ranks up; 0: this one's start.
  void start(uint64_t base_time_unix_ns);
  // The same in two steps, for a window shared with other targets (several targets, or
  // --start-at): attach() makes every probe live but silent; begin() starts recording, the
  // window opening at `window_start_ns` (monotonic; none: when attaching began).
  void attach();
  void begin(uint64_t base_time_unix_ns, std::optional<uint64_t> window_start_ns);
  // Its records up to `watermark_ns` are final (SessionTracer::drain): closed and handed on.
  void advance(uint64_t watermark_ns);
  // At most once a second, what was handed on so far reaches the partial files.
  void flush_if_due(uint64_t now_ns);
  // CUDA has loaded the CUPTI library into the target (at cuInit, after the attach): its
  // activity is recorded from now on.
  void attach_device_activity();
  // The target, held at a dlopen, may be loading a kernel torch compiled: it is probed now,
  // before its first call, while the recording runs. Returns whether the target may load
  // kernels later (its torch has dynamo, and the recording runs).
  bool look_for_compiled_kernels();

  // Stops recording and removes the probes: the window ends.
  void detach();
  // What the probes' work was measured to be: this machine's trap costs, and the time tprof's
  // BPF programs ran over the window where it is this target's alone (one target).
  struct ProbeWork {
    std::optional<TrapCosts> traps;
    std::optional<OpTracer::ProgramStatistics> programs;
    double moving_probes_ns = 0;  // --max-overhead: tprof's CPU putting the probes in and out
    uint32_t sample_hz = 0;       // the stack sampler's rate; 0: none
    // --max-overhead: the windows' cost from the target's CPU per step, where it was measured.
    std::optional<model::OpWindows::StepCost> step_cost;
  };
  // Once the session has drained the ring buffer after detach(): closes what is still open,
  // writes the files and reports on the console, with what the probes cost the target when
  // `work.traps` is given.
  void finish(StopReason reason, const ProbeWork& work);

  const TargetProcess& target() const;
  // --schedule with repeat=R: its last cycle is written.
  bool schedule_done() const;
  uint64_t records() const;
  uint64_t dropped() const;
  // The stack sampler's rate on the target's CPUs; 0: no sampler (no Python stacks).
  uint32_t sample_hz() const;
  // --max-overhead: links or removes the per-op probes (a window of ops opens or closes now).
  // A window links the sites of the ops the target has called so far, and those of the
  // autograd node classes an earlier window saw run (the first: every class's).
  void open_op_window();
  void close_op_window();
  bool op_window_open() const;
  // --max-overhead: the steps a window of ops saw whole, once ended; the Optimizer.step calls so
  // far (counted in BPF, windows or not).
  uint64_t exact_steps_ended() const;
  uint64_t optimizer_steps() const;

  // The target's CPU time since the window began: read now while the window is open, as read at
  // its end after detach(); none when /proc could not tell.
  std::optional<uint64_t> cpu_in_window_ns();

 private:
  struct State;
  void prepare();  // the constructor's work once the plan is made
  std::unique_ptr<State> state_;
};

}  // namespace tprof
