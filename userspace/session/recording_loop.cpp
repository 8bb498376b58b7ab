#include "userspace/session/recording_loop.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include "userspace/cli/error.h"
#include "userspace/assemble/wall_clock.h"

namespace tprof {
namespace {

// Drained this often, a 64 MiB ring buffer holds ~100x what a busy training loop writes in
// one period; the drain costs the target nothing (no wakeups).
constexpr long kDrainPeriodMs = 20;
constexpr uint64_t kStatusPeriodNs = 250'000'000;

UniqueFd periodic_timer(long period_ms) {
  UniqueFd fd(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!fd) throw Error(errno_message("timerfd_create", errno));
  itimerspec spec{};
  spec.it_interval.tv_nsec = period_ms * 1'000'000;
  spec.it_value = spec.it_interval;
  if (::timerfd_settime(fd.get(), 0, &spec, nullptr) != 0) throw Error(errno_message("timerfd_settime", errno));
  return fd;
}

void watch(const UniqueFd& epoll, int fd) {
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = fd;
  if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &event) != 0) throw Error(errno_message("epoll_ctl", errno));
}

// Reads the waiting stop signals; whether one of them stops the recording.
bool stop_requested(const UniqueFd& stop_signals, const RecordingLoopHooks& hooks) {
  if (!hooks.stop_requested) return true;
  bool stop = false;
  signalfd_siginfo signal{};
  while (::read(stop_signals.get(), &signal, sizeof(signal)) == sizeof(signal)) stop |= hooks.stop_requested(signal);
  return stop;
}

}  // namespace

const char* describe(StopReason reason) {
  switch (reason) {
    case StopReason::kDuration: return "duration elapsed";
    case StopReason::kSignal: return "interrupted";
    case StopReason::kTargetExited: return "target exited";
    case StopReason::kTargetExeced: return "target replaced its program (exec)";
    case StopReason::kScheduleDone: return "schedule complete";
    case StopReason::kFault: return "recording failed";
  }
  return "";
}

StopReason run_recording_loop(const UniqueFd& stop_signals, std::optional<double> duration_s,
                              const RecordingLoopHooks& hooks) {
  const UniqueFd drain_timer = periodic_timer(kDrainPeriodMs);
  const UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll) throw Error(errno_message("epoll_create1", errno));
  watch(epoll, stop_signals.get());
  watch(epoll, drain_timer.get());
  if (hooks.traced_events_fd >= 0) watch(epoll, hooks.traced_events_fd);

  const uint64_t start_ns = monotonic_now_ns();
  const uint64_t duration_ns = duration_s ? static_cast<uint64_t>(*duration_s * 1e9) : UINT64_MAX;
  uint64_t last_status_ns = 0;
  for (;;) {
    epoll_event ready[3];
    const int count = ::epoll_wait(epoll.get(), ready, 3, -1);
    if (count < 0) {
      if (errno == EINTR) continue;
      throw Error(errno_message("epoll_wait", errno));
    }
    bool drain_due = false;
    for (int i = 0; i < count; ++i) {
      const int fd = ready[i].data.fd;
      if (fd == stop_signals.get()) {
        if (stop_requested(stop_signals, hooks)) return StopReason::kSignal;
      } else if (fd == hooks.traced_events_fd) {
        hooks.handle_traced_events();
      } else {
        uint64_t expirations = 0;
        (void)!::read(drain_timer.get(), &expirations, sizeof(expirations));
        drain_due = true;
      }
    }
    if (!drain_due) continue;
    hooks.drain();
    // Checked on the drain timer (every kDrainPeriodMs) rather than on pidfds: targets come
    // and go (--children), and a target's last records are drained by then anyway.
    if (hooks.all_targets_exited()) return StopReason::kTargetExited;
    if (hooks.schedule_done && hooks.schedule_done()) return StopReason::kScheduleDone;
    const uint64_t now_ns = monotonic_now_ns();
    if (now_ns - start_ns >= duration_ns) return StopReason::kDuration;
    if (now_ns - last_status_ns >= kStatusPeriodNs) {
      hooks.show_status(static_cast<double>(now_ns - start_ns) / 1e9);
      last_status_ns = now_ns;
    }
  }
}

}  // namespace tprof
