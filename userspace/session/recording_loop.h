// The wait while recording: drains the ring buffer on a timer and returns when --duration
// elapses, a stop signal arrives, or the target exits.
#pragma once

#include <functional>
#include <optional>

#include "userspace/session/target_process.h"
#include "userspace/loader/unique_fd.h"

namespace tprof {

enum class StopReason { kDuration, kSignal, kTargetExited, kFault };

const char* describe(StopReason reason);

struct RecordingLoopHooks {
  std::function<void()> drain;                         // every drain period
  std::function<void(double elapsed_s)> show_status;  // a few times a second
};

// Throws tprof::Error when waiting or draining fails.
StopReason run_recording_loop(const TargetProcess& target, const UniqueFd& stop_signals,
                              std::optional<double> duration_s, const RecordingLoopHooks& hooks);

}  // namespace tprof
