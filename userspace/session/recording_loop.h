// The wait while recording: drains the ring buffers on a timer and returns when --duration
// elapses, a stop signal arrives, every target has exited, or --schedule has written its last
// cycle.
#pragma once

#include <functional>
#include <optional>

#include "userspace/loader/unique_fd.h"

namespace tprof {

enum class StopReason { kDuration, kSignal, kTargetExited, kScheduleDone, kFault };

const char* describe(StopReason reason);

struct RecordingLoopHooks {
  std::function<void()> drain;                         // every drain period
  std::function<void(double elapsed_s)> show_status;  // a few times a second
  std::function<bool()> all_targets_exited;           // asked after every drain
  std::function<bool()> schedule_done;                // likewise: --schedule wrote its last cycle
};

// Throws tprof::Error when waiting or draining fails.
StopReason run_recording_loop(const UniqueFd& stop_signals, std::optional<double> duration_s,
                              const RecordingLoopHooks& hooks);

}  // namespace tprof
