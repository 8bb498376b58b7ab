#include "userspace/session/attach_session.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "userspace/cli/console.h"
#include "userspace/cli/error.h"
#include "userspace/loader/trap_calibration.h"
#include "userspace/session/overhead_budget.h"
#include "userspace/session/plan_cache.h"
#include "userspace/session/process_holder.h"
#include "userspace/session/recording_loop.h"
#include "userspace/session/session_tracer.h"
#include "userspace/session/step_cost_meter.h"
#include "userspace/session/stop_signals.h"
#include "userspace/session/target_discovery.h"
#include "userspace/session/target_recording.h"
#include "userspace/session/trace_file_sinks.h"

namespace tprof {
namespace {

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
        library_plans_(options.plan_cache ? std::make_unique<PlanCache>(PlanCache::default_directory()) : nullptr) {
    if (options.max_overhead) overhead_budget_.emplace(*options.max_overhead);
  }

  // Plans, loads and starts one target. The first one started sets the base time all share.
  void add(pid_t pid, bool found_later = false) {
    TargetRecording& recording = prepare(pid, found_later);
    recording.start(base_time_unix_ns_);
    if (base_time_unix_ns_ == 0) base_time_unix_ns_ = unix_now_ns();
    start_calibration();
  }

  // For a window shared by every target: plans, loads and attaches one, silent until begin_all.
  void add_attached(pid_t pid) { prepare(pid).attach(); }

  void begin_all(uint64_t window_start_unix_ns) {
    base_time_unix_ns_ = window_start_unix_ns;
    const uint64_t window_start_ns = monotonic_now_ns();
    for (const auto& recording : recordings_) recording->begin(base_time_unix_ns_, window_start_ns);
    start_calibration();
  }

  void drain(uint64_t time_limit_ns) {
    drain_ring_buffer(time_limit_ns);
    keep_within_overhead_budget();
  }

  bool empty() const { return recordings_.empty(); }

  // Loads the BPF object now rather than at the first target (the privileges are checked):
  // `tprof record` does it while its command starts, so that a hold waits less.
  void load_tracer() { session_.tracer(); }
  void start_loading_tracer() { session_.start_loading(); }

  bool all_exited() const {
    for (const auto& recording : recordings_)
      if (!recording->target().has_exited()) return false;
    return true;
  }

  // --schedule: every target still running has written its schedule's last cycle (or, under
  // --max-overhead, no window is open and none of the schedule's cycles is still to come).
  bool all_schedules_done() const {
    if (scheduled_windows_done_) return true;
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

  // What the probes have taken of the one target's CPU so far, estimated as at the end (the
  // status line shows it); none before the calibration and a CPU reading are in, or with
  // several targets. With --max-overhead, as at the last reading of the budget.
  std::optional<double> probe_share_so_far() {
    if (recordings_.size() != 1) return std::nullopt;
    const std::optional<uint64_t> cpu_ns = recordings_.front()->cpu_in_window_ns();
    if (!cpu_ns || *cpu_ns == 0) return std::nullopt;
    std::optional<double> cost_ns = probe_cost_so_far_ns(*cpu_ns);
    if (!cost_ns) return std::nullopt;
    if (overhead_budget_) cost_ns = step_cost_meter_.cost_ns();
    return std::min(1.0, *cost_ns / static_cast<double>(*cpu_ns));
  }

  // --max-overhead: opens or closes the one target's window of ops as the budget says, once the
  // traps are calibrated (until then no window opens).
  void keep_within_overhead_budget() {
    if (!overhead_budget_ || recordings_.size() != 1) return;
    TargetRecording& recording = *recordings_.front();
    std::optional<OverheadBudget::Reading> reading = budget_reading(recording);
    if (!reading) return;
    const bool open = recording.op_window_open();
    const std::optional<OverheadBudget::Scheduled> scheduled = scheduled_window(*reading, open);
    if (scheduled && scheduled->none_left) scheduled_windows_done_ = true;
    switch (overhead_budget_->decide(*reading, open, scheduled)) {
      case OverheadBudget::Decision::kOpen:
        moving_probes_ns_ += cpu_time_of([&] { recording.open_op_window(); });
        // The cycle whose steps have not begun once the probes are in: on a loop faster than
        // putting them in (tens of ms, more for the first window), the one due may have
        // begun meanwhile, and the window then waits for the next.
        if (options_.schedule) window_cycle_ = options_.schedule->next_cycle_after(recording.optimizer_steps());
        if ((reading = budget_reading(recording))) overhead_budget_->opened(*reading);
        break;
      case OverheadBudget::Decision::kClose:
        moving_probes_ns_ += cpu_time_of([&] { recording.close_op_window(); });
        break;
      case OverheadBudget::Decision::kKeep: break;
    }
  }

  // --schedule: where the one window stands in the schedule's steps, counted by the
  // Optimizer.step calls begun so far, n. Step N runs from the end of the N-th call, so step n
  // may have begun, and a step L has surely ended once call L + 2 has begun. The probes go in
  // for the next cycle from the last step before its warmup steps (which then cover putting
  // them in, as torch's warmup covers starting its profiler).
  std::optional<OverheadBudget::Scheduled> scheduled_window(const OverheadBudget::Reading& reading, bool open) const {
    if (!options_.schedule) return std::nullopt;
    const StepSchedule& schedule = *options_.schedule;
    const uint64_t begun = reading.optimizer_steps;
    // It closes between recorded steps, so as not to cut one of the next cycle (the 20 ms
    // between readings may be several steps).
    if (open)
      return OverheadBudget::Scheduled{
          .cycle_recorded = (!window_cycle_ || begun >= schedule.last_recorded_step(*window_cycle_) + 2) &&
                            schedule.between_recorded_steps(begun)};
    const std::optional<uint64_t> next = schedule.next_cycle_after(begun);
    return OverheadBudget::Scheduled{
        .cycle_due = next && schedule.first_recorded_step(*next) <= begun + schedule.warmup + 1,
        .none_left = !next};
  }

  // The figures the budget decides on. Each reading goes to the step cost meter too, which
  // gives the cost: measured from the target's CPU per step where it can be.
  std::optional<OverheadBudget::Reading> budget_reading(TargetRecording& recording) {
    const std::optional<uint64_t> cpu_ns = recording.cpu_in_window_ns();
    const std::optional<double> estimate_ns = cpu_ns ? probe_cost_so_far_ns(*cpu_ns) : std::nullopt;
    if (!estimate_ns) return std::nullopt;
    step_cost_meter_.add(
        {.target_cpu_ns = *cpu_ns, .steps = recording.optimizer_steps(), .estimated_cost_ns = *estimate_ns},
        recording.op_window_open());
    return OverheadBudget::Reading{.now_ns = monotonic_now_ns(),
                                   .probe_cost_ns = step_cost_meter_.cost_ns(),
                                   .target_cpu_ns = *cpu_ns,
                                   .exact_steps = recording.exact_steps_ended(),
                                   .optimizer_steps = recording.optimizer_steps()};
  }

  // A target that replaced its program (exec): its probes go before it runs on, and its files
  // are written. The new program is a target of its own if it loads torch.
  void end(pid_t pid) {
    const auto found = std::find_if(recordings_.begin(), recordings_.end(),
                                    [pid](const auto& recording) { return recording->target().pid() == pid; });
    if (found == recordings_.end()) return;
    (*found)->detach();
    drain_ring_buffer(0);
    (*found)->finish(StopReason::kTargetExeced,
                     {.traps = trap_costs(),
                      .programs = std::nullopt,
                      .moving_probes_ns = 0,
                      .sample_hz = 0,
                      .step_cost = std::nullopt});
    recordings_.erase(found);
  }

  void attach_device_activity(pid_t pid) {
    for (const auto& recording : recordings_)
      if (recording->target().pid() == pid) recording->attach_device_activity();
  }

  // Whether target `pid` may load more kernels (it is recorded, and its torch has dynamo).
  bool look_for_compiled_kernels(pid_t pid) {
    for (const auto& recording : recordings_)
      if (recording->target().pid() == pid) return recording->look_for_compiled_kernels();
    return false;
  }

  // Stops and writes out every target; returns what went wrong reading the last records ("" if
  // nothing): the files are written either way.
  std::string stop(StopReason reason) {
    // The budget's last reading, while the probes are as they were.
    if (overhead_budget_ && recordings_.size() == 1) budget_reading(*recordings_.front());
    for (const auto& recording : recordings_) recording->detach();
    const TargetRecording::ProbeWork work{.traps = trap_costs(),
                                          .programs = program_work_of_one_target(),
                                          .moving_probes_ns = moving_probes_ns_,
                                          .sample_hz = recordings_.size() == 1 ? recordings_.front()->sample_hz() : 0,
                                          .step_cost = step_cost_meter_.step_cost()};
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
      recording->finish(own, work);
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

  // This machine's trap costs, measured once a session in tprof's own process on a thread of
  // its own, once recording has begun: not on the attach's path. SCHED_IDLE: it runs only on a
  // CPU nobody else wants, never taking one from the target (the calibration times the thread's
  // own CPU). Where every CPU is busy it may never run: the stop waits for it only a while, and
  // --max-overhead, which opens no window without it, calibrates at the usual priority instead
  // (about 0.3 s of CPU once).
  void start_calibration() {
    if (trap_costs_.valid()) return;
    programs_at_begin_ = session_.tracer().program_statistics();
    const bool needed_now = options_.max_overhead.has_value();
    // A detached thread, not std::async: the last future of an async task would wait for it at
    // tprof's exit.
    auto costs = std::make_shared<std::promise<std::optional<TrapCosts>>>();
    trap_costs_ = costs->get_future().share();
    std::thread([costs, needed_now] {
      const sched_param idle{};
      if (!needed_now) ::sched_setscheduler(0, SCHED_IDLE, &idle);  // this thread; best effort
      try {
        costs->set_value(calibrate_trap_costs());
      } catch (const std::exception&) {
        costs->set_value(std::nullopt);  // the estimate is left out of the summary
      }
    }).detach();
  }

  // What the probes have cost the one target over `target_cpu_ns` of its CPU so far: the traps
  // the kernel counted at this machine's calibrated costs, tprof's BPF programs' run time, the
  // sampler's interrupts and tprof's CPU moving the probes. None while calibrating, or with
  // several targets.
  std::optional<double> probe_cost_so_far_ns(uint64_t target_cpu_ns) {
    if (!trap_costs_.valid() || trap_costs_.wait_for(std::chrono::seconds(0)) != std::future_status::ready)
      return std::nullopt;
    const std::optional<TrapCosts> traps = trap_costs_.get();
    const auto programs = program_work_of_one_target();
    if (!traps || !programs) return std::nullopt;
    return traps->estimate_ns(*programs) + moving_probes_ns_ +
           traps->sampling_ns(target_cpu_ns, recordings_.front()->sample_hz());
  }

  // tprof's CPU time (every thread, the kernel's work for it included) over `work`.
  template <typename Work>
  static double cpu_time_of(Work&& work) {
    const uint64_t start_ns = process_cpu_now_ns();
    work();
    return static_cast<double>(process_cpu_now_ns() - start_ns);
  }
  static uint64_t process_cpu_now_ns() {
    timespec now{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
  }

  std::optional<TrapCosts> trap_costs() const {
    constexpr auto kStopWaitsForCalibration = std::chrono::seconds(2);
    if (!trap_costs_.valid()) return std::nullopt;
    if (trap_costs_.wait_for(kStopWaitsForCalibration) != std::future_status::ready) {
      console_.line("warning: no estimate of the probes' cost: no CPU was idle to measure a trap's cost on");
      return std::nullopt;
    }
    return trap_costs_.get();
  }

  // The BPF programs serve every target at once: what the kernel counted of them is one
  // target's only when it was the session's one target from its first begin.
  std::optional<OpTracer::ProgramStatistics> program_work_of_one_target() {
    if (targets_prepared_ != 1 || recordings_.size() != 1 || !programs_at_begin_) return std::nullopt;
    const auto now = session_.tracer().program_statistics();
    if (!now) return std::nullopt;
    return *now - *programs_at_begin_;
  }

  TargetRecording& prepare(pid_t pid, bool found_later = false) {
    Console& console = labelled_ ? *consoles_.emplace_back(std::make_unique<Console>(options_.quiet, "pid " + std::to_string(pid)))
                                 : console_;
    ++targets_prepared_;
    recordings_.push_back(std::make_unique<TargetRecording>(found_later ? later_options_ : options_, pid, session_,
                                                            library_plans_, clock_, console));
    return *recordings_.back();
  }

  // A target found while recording (held: record, --children) tells how long its own attach took, not how
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
  uint64_t base_time_unix_ns_ = 0;
  std::shared_future<std::optional<TrapCosts>> trap_costs_;
  std::optional<OpTracer::ProgramStatistics> programs_at_begin_;  // at the first begin
  size_t targets_prepared_ = 0;
  std::optional<OverheadBudget> overhead_budget_;  // --max-overhead
  // --max-overhead: tprof's CPU spent putting the probes in and out, counted as the target's:
  // it competes for the target's CPUs (on the 2-vCPU test VM, ~10 ms a window of the ~180 sites
  // of a small loop's ops, ~140 ms for the first, which links every autograd node class).
  double moving_probes_ns_ = 0;
  StepCostMeter step_cost_meter_;  // --max-overhead: what the windows cost, measured
  // --max-overhead with --schedule: the cycle the open window is for, and whether none is left.
  std::optional<uint64_t> window_cycle_;
  bool scheduled_windows_done_ = false;
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

// The recording loop's view of a session's targets.
RecordingLoopHooks loop_hooks(Recordings& recordings, Console& console) {
  RecordingLoopHooks hooks;
  hooks.drain = [&] { recordings.drain(kDrainTimeLimitNs); };
  hooks.show_status = [&](double elapsed_s) {
    console.status(elapsed_s, recordings.records(), recordings.dropped(), recordings.probe_share_so_far());
  };
  hooks.all_targets_exited = [&] { return recordings.all_exited(); };
  hooks.schedule_done = [&] { return recordings.all_schedules_done(); };
  return hooks;
}

// What a held process gets: attached, and the time it waited said; or, when it replaced its
// program, its recording ended.
ProcessHolder::Callbacks holder_callbacks(Recordings& recordings, Console& console) {
  ProcessHolder::Callbacks callbacks;
  callbacks.torch_loaded = [&](pid_t pid, uint64_t held_ns) {
    recordings.add(pid, /*found_later=*/true);  // timed from its own planning
    char held_ms[32];
    std::snprintf(held_ms, sizeof(held_ms), "%.1f", static_cast<double>(monotonic_now_ns() - held_ns) / 1e6);
    console.line("held " + std::to_string(pid) + " at its load of torch for " + held_ms + " ms, until every probe was in");
  };
  callbacks.image_replaced = [&](pid_t pid) { recordings.end(pid); };
  callbacks.device_library_loaded = [&](pid_t pid) { recordings.attach_device_activity(pid); };
  callbacks.library_loaded = [&](pid_t pid) { return recordings.look_for_compiled_kernels(pid); };
  return callbacks;
}

// With --children: the targets' descendants that have loaded torch are targets too; the others
// are followed, and held if they load it.
std::vector<pid_t> with_descendants_that_loaded_torch(std::vector<pid_t> pids, std::vector<pid_t>& descendants) {
  descendants = descendants_of(std::set<pid_t>(pids.begin(), pids.end()));
  for (const pid_t child : descendants) {
    try {
      if (TargetProcess(child).find_mapped_library("libtorch_cpu.so")) pids.push_back(child);
    } catch (const Error&) {
      // gone already
    }
  }
  return pids;
}

// What holding the targets at their later loads cost them, if they were.
void say_load_holds(const ProcessHolder& holder, Console& console) {
  const ProcessHolder::LoadHolds holds = holder.load_holds();
  if (holds.count == 0) return;
  char held_ms[32];
  std::snprintf(held_ms, sizeof(held_ms), "%.1f", static_cast<double>(holds.ns) / 1e6);
  console.line("held " + std::to_string(holds.count) + " library loads after torch's for " + held_ms +
               " ms in all, to probe inductor's kernels before their first call");
}

// Runs the recording loop, then stops and writes out every target; throws tprof::Error if
// recording failed (after writing what it had).
StopReason record_until_stopped(Recordings& recordings, Console& console, const UniqueFd& stop_signals,
                                std::optional<double> duration_s, const RecordingLoopHooks& hooks,
                                ProcessHolder* holder) {
  StopReason reason;
  std::string fault;
  try {
    reason = run_recording_loop(stop_signals, duration_s, hooks);
  } catch (const std::exception& error) {
    reason = StopReason::kFault;
    fault = error.what();
  }
  // A process held from now on would wait for an attach that never comes.
  if (holder) holder->stop_holding();
  console.clear_status();
  const std::string finishing_fault = recordings.empty() ? "" : recordings.stop(reason);
  if (fault.empty()) fault = finishing_fault;
  if (!fault.empty()) throw Error("recording stopped early: " + fault + " (the trace up to that point was written)");
  return reason;
}

// The traced processes run on after the recording; the command is waited for, and the signals
// meant for it passed on.
void wait_for_command_end(ProcessHolder& holder, const UniqueFd& stop_signals) {
  while (!holder.command_status()) {
    pollfd ready[2] = {{.fd = holder.events_fd(), .events = POLLIN, .revents = 0},
                       {.fd = stop_signals.get(), .events = POLLIN, .revents = 0}};
    if (::poll(ready, 2, -1) < 0 && errno != EINTR) throw Error(errno_message("poll", errno));
    signalfd_siginfo signal{};
    while (::read(stop_signals.get(), &signal, sizeof(signal)) == sizeof(signal))
      if (signal.ssi_code != SI_KERNEL) holder.forward_signal(static_cast<int>(signal.ssi_signo));
    holder.answer({});
  }
}

}  // namespace

void require_one_target_for_max_overhead(const AttachOptions& options) {
  if (options.max_overhead)
    throw Error("--max-overhead governs one target, from the kernel's counts of tprof's programs, which every "
                "target shares: attach to one process, without --children or --follow");
}

void require_default_names_for_several(const AttachOptions& options) {
  if (!options.output_path.empty() || !options.execution_trace_path.empty() || !options.stacks_path.empty() ||
      !options.memory_stacks_path.empty() || !options.memory_timeline_path.empty())
    throw Error("-o, --et, --stacks, --memory-stacks and --memory-timeline name one target's files; with several "
                "targets use --output-dir");
}

int run_record(const AttachOptions& options, ProcessHolder& holder, const std::string& command_name) {
  Console console(options.quiet);
  if (options.follow) require_one_target_for_max_overhead(options);
  const UniqueFd stop_signals = block_stop_signals();
  const MonotonicToUnix clock = MonotonicToUnix::calibrate();
  Recordings recordings(options, clock, console, options.follow);
  recordings.load_tracer();
  const ProcessHolder::Callbacks callbacks = holder_callbacks(recordings, console);
  RecordingLoopHooks hooks = loop_hooks(recordings, console);
  hooks.all_targets_exited = [&] { return holder.command_status() && recordings.all_exited(); };
  // A signal from the terminal reached the command too (it shares tprof's process group); one
  // sent to tprof alone is passed on. The command decides what it means; a second one stops
  // the recording.
  int stop_signals_seen = 0;
  hooks.stop_requested = [&](const signalfd_siginfo& signal) {
    if (signal.ssi_code != SI_KERNEL) holder.forward_signal(static_cast<int>(signal.ssi_signo));
    return ++stop_signals_seen >= 2;
  };
  hooks.traced_events_fd = holder.events_fd();
  hooks.handle_traced_events = [&] { holder.answer(callbacks); };
  record_until_stopped(recordings, console, stop_signals, options.duration_s, hooks, &holder);
  wait_for_command_end(holder, stop_signals);
  say_load_holds(holder, console);
  if (holder.holds_refused() > 0)
    console.line("warning: " + std::to_string(holder.holds_refused()) +
                 " library loads were not held (their thread blocked or handled SIGURG and SIGWINCH): ops may "
                 "have run before the probes were in");
  if (recordings.empty()) {
    const std::string written = options.schedule ? "no trace" : write_empty_recording(options, holder.command());
    console.line(command_name + " " + holder.command_end() + " before it loaded torch: nothing was recorded (wrote " +
                 written + ")");
  } else if (holder.command_end().rfind("was killed", 0) == 0) {
    console.line(command_name + " " + holder.command_end());
  }
  return *holder.command_status();
}

int run_attach(const AttachOptions& options) {
  Console console(options.quiet);
  const std::vector<pid_t> named = initial_targets(options);
  std::vector<pid_t> descendants;
  const std::vector<pid_t> pids =
      options.follow_children ? with_descendants_that_loaded_torch(named, descendants) : named;
  const bool several = pids.size() > 1 || options.follow_children;
  if (several) {
    require_default_names_for_several(options);
    require_one_target_for_max_overhead(options);
  }
  const UniqueFd stop_signals = block_stop_signals();
  const MonotonicToUnix clock = MonotonicToUnix::calibrate();
  Recordings recordings(options, clock, console, several);
  recordings.start_loading_tracer();  // while the first target is planned
  RecordingLoopHooks hooks = loop_hooks(recordings, console);
  const ProcessHolder::Callbacks callbacks = holder_callbacks(recordings, console);
  // Followed before the attach, so that a process started once tprof says "attached" is held;
  // one held meanwhile waits for the recording loop.
  std::optional<ProcessHolder> holder;
  if (options.follow_children) {
    std::vector<pid_t> followed = named;
    followed.insert(followed.end(), descendants.begin(), descendants.end());
    holder.emplace(followed, std::set<pid_t>(pids.begin(), pids.end()));
    hooks.traced_events_fd = holder->events_fd();
    hooks.handle_traced_events = [&] { holder->answer(callbacks); };
  }
  // Every target named or matched must be recordable: a job traced in part would mislead.
  if (options.start_at_unix_s) {
    for (const pid_t pid : pids) recordings.add_attached(pid);
    if (!wait_for_window(options, stop_signals, console)) {
      if (holder) holder->stop_holding();
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

  record_until_stopped(recordings, console, stop_signals, options.duration_s, hooks, holder ? &*holder : nullptr);
  if (holder) say_load_holds(*holder, console);
  return 0;
}

}  // namespace tprof
