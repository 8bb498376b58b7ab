// The wait while recording: drains the ring buffers on a timer and returns when --duration
// elapses, a stop signal arrives, every target has exited, or --schedule has written its last
// cycle.
#pragma once

#include <sys/signalfd.h>

#include <functional>
#include <optional>

#include "userspace/loader/unique_fd.h"

namespace tprof {

enum class StopReason { kDuration, kSignal, kTargetExited, kTargetExeced, kScheduleDone, kFault };

const char* describe(StopReason reason);

struct RecordingLoopHooks {
  std::function<void()> drain;                         // every drain period
  std::function<void(double elapsed_s)> show_status;  // a few times a second
  std::function<bool()> all_targets_exited;           // asked after every drain
  std::function<bool()> schedule_done;                // likewise: --schedule wrote its last cycle
  // `tprof record`: a stop signal is the command's to act on. Given it, this says whether to
  // stop recording now; without it, recording stops.
  std::function<bool(const signalfd_siginfo& signal)> stop_requested;
  // Processes tprof traces (`tprof record`): this fd readable means they reported something,
  // which `handle_traced_events` answers at once, since a traced process waits for its answer.
  int traced_events_fd = -1;
  std::function<void()> handle_traced_events;
};

// Throws tprof::Error when waiting or draining fails.
StopReason run_recording_loop(const UniqueFd& stop_signals, std::optional<double> duration_s,
                              const RecordingLoopHooks& hooks);

}  // namespace tprof
