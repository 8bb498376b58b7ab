// The wait while recording: drains the ring buffers on a timer and returns when --duration
// elapses, a stop signal arrives, or every target has exited.
#pragma once

#include <functional>
#include <optional>

#include "userspace/loader/unique_fd.h"

namespace tprof {

enum class StopReason { kDuration, kSignal, kTargetExited, kFault };

const char* describe(StopReason reason);

struct RecordingLoopHooks {
  std::function<void()> drain;                         // every drain period
  std::function<void(double elapsed_s)> show_status;  // a few times a second
  std::function<bool()> all_targets_exited;           // asked after every drain
};

// Throws tprof::Error when waiting or draining fails.
StopReason run_recording_loop(const UniqueFd& stop_signals, std::optional<double> duration_s,
                              const RecordingLoopHooks& hooks);

}  // namespace tprof
