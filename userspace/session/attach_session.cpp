#include "userspace/session/attach_session.h"

#include <poll.h>

#include <algorithm>
#include <exception>
#include <map>
#include <memory>
#include <set>

#include "userspace/cli/console.h"
#include "userspace/cli/error.h"
#include "userspace/session/plan_cache.h"
#include "userspace/session/recording_loop.h"
#include "userspace/session/session_tracer.h"
#include "userspace/session/stop_signals.h"
#include "userspace/session/target_discovery.h"
#include "userspace/session/target_recording.h"

namespace tprof {
namespace {

// How often --children looks for new processes, and how long a child may take to load torch
// before it is given up on (a launcher's helper, a worker that never imports torch).
constexpr uint64_t kChildScanPeriodNs = 500'000'000;
constexpr uint64_t kChildTorchWaitNs = 60'000'000'000;
// How long one drain may take before it returns (so that a stop signal is still seen).
constexpr uint64_t kDrainTimeLimitNs = 500'000'000;

// The targets of one `tprof attach`: one op tracer and ring buffer for all (SessionTracer), one
// plan per libtorch_cpu file, and per target its probes, its pipeline and its files.
class Recordings {
 public:
  Recordings(const AttachOptions& options, const MonotonicToUnix& clock, Console& console, bool labelled)
      : options_(options),
        later_options_(counted_from_own_planning(options)),
        clock_(clock),
        console_(console),
        labelled_(labelled),
        session_(options.ring_buffer_bytes),
        library_plans_(options.plan_cache ? std::make_unique<PlanCache>(PlanCache::default_directory()) : nullptr) {}

  // Plans, loads and starts one target. The first one started sets the base time all share.
  void add(pid_t pid, bool found_later = false) {
    TargetRecording& recording = prepare(pid, found_later);
    recording.start(base_time_unix_ns_);
    if (base_time_unix_ns_ == 0) base_time_unix_ns_ = unix_now_ns();
  }

  // For a window shared by every target: plans, loads and attaches one, silent until begin_all.
  void add_attached(pid_t pid) { prepare(pid).attach(); }

  void begin_all(uint64_t window_start_unix_ns) {
    base_time_unix_ns_ = window_start_unix_ns;
    const uint64_t window_start_ns = monotonic_now_ns();
    for (const auto& recording : recordings_) recording->begin(base_time_unix_ns_, window_start_ns);
  }

  // The ring buffer, then (with --children) any new child that has loaded torch.
  void drain(uint64_t time_limit_ns) {
    drain_ring_buffer(time_limit_ns);
    if (options_.follow_children) adopt_children();
  }

  bool all_exited() const {
    for (const auto& recording : recordings_)
      if (!recording->target().has_exited()) return false;
    return true;
  }

  // --schedule: every target still running has written its schedule's last cycle.
  bool all_schedules_done() const {
    bool any = false;
    for (const auto& recording : recordings_) {
      if (recording->schedule_done()) {
        any = true;
      } else if (!recording->target().has_exited()) {
        return false;
      }
    }
    return any;
  }

  uint64_t records() const {
    uint64_t total = 0;
    for (const auto& recording : recordings_) total += recording->records();
    return total;
  }

  uint64_t dropped() const {
    uint64_t total = 0;
    for (const auto& recording : recordings_) total += recording->dropped();
    return total;
  }

  // Stops and writes out every target; returns what went wrong reading the last records ("" if
  // nothing): the files are written either way.
  std::string stop(StopReason reason) {
    for (const auto& recording : recordings_) recording->detach();
    std::string fault;
    try {
      drain_ring_buffer(0);
    } catch (const std::exception& error) {
      fault = error.what();
      reason = StopReason::kFault;
    }
    for (const auto& recording : recordings_) {
      const StopReason own = reason != StopReason::kFault && recording->target().has_exited()
                                 ? StopReason::kTargetExited
                                 : reason;
      recording->finish(own);
    }
    if (session_.unrouted() > 0)
      console_.line("warning: " + group_thousands(session_.unrouted()) +
                    " records named no target and were ignored (tprof and its BPF object disagree?)");
    return fault;
  }

 private:
  // What is final in the ring buffer, handed on to every target, and written at most once a
  // second.
  void drain_ring_buffer(uint64_t time_limit_ns) {
    const uint64_t drain_ns = monotonic_now_ns();
    session_.drain(time_limit_ns, [this](uint64_t watermark_ns) {
      for (const auto& recording : recordings_) recording->advance(watermark_ns);
    });
    for (const auto& recording : recordings_) recording->flush_if_due(drain_ns);
  }

  // A child is taken once it has loaded libtorch_cpu (a forked DataLoader worker has it at
  // once; a launched rank after its `import torch`), and given up on after kChildTorchWaitNs.
  void adopt_children() {
    const uint64_t now_ns = monotonic_now_ns();
    if (now_ns - last_child_scan_ns_ < kChildScanPeriodNs) return;
    last_child_scan_ns_ = now_ns;
    for (const pid_t child : descendants_of(traced_)) {
      if (traced_.contains(child) || given_up_.contains(child)) continue;
      const uint64_t first_seen_ns = first_seen_ns_.try_emplace(child, now_ns).first->second;
      try {
        const TargetProcess process(child);
        if (!process.find_mapped_library("libtorch_cpu.so")) {
          if (now_ns - first_seen_ns > kChildTorchWaitNs) give_up(child, "it loaded no torch in 60 s");
          continue;
        }
        console_.line("child " + std::to_string(child) + " (" + process.name() + ") of a target: attaching");
        add(child, /*found_later=*/true);
      } catch (const std::exception& error) {
        give_up(child, error.what());
      }
    }
  }

  TargetRecording& prepare(pid_t pid, bool found_later = false) {
    Console& console = labelled_ ? *consoles_.emplace_back(std::make_unique<Console>(options_.quiet, "pid " + std::to_string(pid)))
                                 : console_;
    recordings_.push_back(std::make_unique<TargetRecording>(found_later ? later_options_ : options_, pid, session_,
                                                            library_plans_, clock_, console));
    traced_.insert(pid);
    return *recordings_.back();
  }

  void give_up(pid_t child, const std::string& why) {
    given_up_.insert(child);
    console_.line("not recording child " + std::to_string(child) + ": " + why);
  }

  // A target found while recording (--children) tells how long its own attach took, not how
  // long since tprof started.
  static AttachOptions counted_from_own_planning(AttachOptions options) {
    options.started_ns = 0;
    return options;
  }

  const AttachOptions& options_;
  const AttachOptions later_options_;
  MonotonicToUnix clock_;
  Console& console_;
  const bool labelled_;  // several targets: each one's console lines say whose they are
  SessionTracer session_;  // before the recordings, which hold parts of it
  TorchLibraryPlans library_plans_;
  std::vector<std::unique_ptr<Console>> consoles_;
  std::vector<std::unique_ptr<TargetRecording>> recordings_;
  std::set<pid_t> traced_;
  std::set<pid_t> given_up_;
  std::map<pid_t, uint64_t> first_seen_ns_;
  uint64_t last_child_scan_ns_ = 0;
  uint64_t base_time_unix_ns_ = 0;
};

// The pids named and those --match finds, each once, in order.
std::vector<pid_t> initial_targets(const AttachOptions& options) {
  std::vector<pid_t> pids = options.pids;
  if (!options.match.empty()) {
    const std::vector<pid_t> matching = processes_matching(options.match);
    if (matching.empty() && pids.empty()) throw Error("no process's command line matches --match " + options.match);
    pids.insert(pids.end(), matching.begin(), matching.end());
  }
  std::set<pid_t> seen;
  std::erase_if(pids, [&](pid_t pid) { return !seen.insert(pid).second; });
  if (pids.empty()) throw Error("no target: give a pid, or --match REGEX");
  return pids;
}

// Waits for the agreed start, attached; false if a stop signal came first.
bool wait_for_window(const AttachOptions& options, const UniqueFd& stop_signals, Console& console) {
  const auto start_ns = static_cast<uint64_t>(*options.start_at_unix_s * 1e9);
  const uint64_t now_ns = unix_now_ns();
  if (start_ns <= now_ns) {
    console.line("warning: --start-at was " + std::to_string((now_ns - start_ns) / 1'000'000) +
                 " ms ago when every probe was live: recording starts now");
    return true;
  }
  console.line("attached; recording starts at --start-at, in " + std::to_string((start_ns - now_ns) / 1'000'000) + " ms");
  while (true) {
    const uint64_t left_ns = start_ns - std::min(start_ns, unix_now_ns());
    if (left_ns == 0) return true;
    pollfd signal{.fd = stop_signals.get(), .events = POLLIN, .revents = 0};
    if (::poll(&signal, 1, static_cast<int>(std::min<uint64_t>(left_ns / 1'000'000 + 1, 1000))) > 0) return false;
  }
}

}  // namespace

int run_attach(const AttachOptions& options) {
  Console console(options.quiet);
  const std::vector<pid_t> pids = initial_targets(options);
  const bool several = pids.size() > 1 || options.follow_children;
  if (several && (!options.output_path.empty() || !options.execution_trace_path.empty() || !options.stacks_path.empty()))
    throw Error("-o, --et and --stacks name one target's files; with several targets use --output-dir");
  const UniqueFd stop_signals = block_stop_signals();
  const MonotonicToUnix clock = MonotonicToUnix::calibrate();
  Recordings recordings(options, clock, console, several);
  // Every target named or matched must be recordable: a job traced in part would mislead.
  if (options.start_at_unix_s) {
    for (const pid_t pid : pids) recordings.add_attached(pid);
    if (!wait_for_window(options, stop_signals, console)) {
      recordings.begin_all(unix_now_ns());
      recordings.stop(StopReason::kSignal);
      return 0;
    }
    recordings.begin_all(std::max(unix_now_ns(), static_cast<uint64_t>(*options.start_at_unix_s * 1e9)));
  } else if (pids.size() > 1) {
    // The ranks of a job are compared over one window: it opens for all once all are attached.
    for (const pid_t pid : pids) recordings.add_attached(pid);
    recordings.begin_all(unix_now_ns());
  } else {
    recordings.add(pids.front());
  }

  StopReason reason;
  std::string fault;
  try {
    reason = run_recording_loop(stop_signals, options.duration_s,
                                {.drain = [&] { recordings.drain(kDrainTimeLimitNs); },
                                 .show_status =
                                     [&](double elapsed_s) {
                                       console.status(elapsed_s, recordings.records(), recordings.dropped());
                                     },
                                 .all_targets_exited = [&] { return recordings.all_exited(); },
                                 .schedule_done = [&] { return recordings.all_schedules_done(); }});
  } catch (const std::exception& error) {
    reason = StopReason::kFault;
    fault = error.what();
  }
  console.clear_status();
  const std::string finishing_fault = recordings.stop(reason);
  if (fault.empty()) fault = finishing_fault;
  if (!fault.empty()) throw Error("recording stopped early: " + fault + " (the trace up to that point was written)");
  return 0;
}

}  // namespace tprof
