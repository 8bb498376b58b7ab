// --max-overhead P: when the per-op probes go in and out so that what they cost stays within P
// of the target's run time (issue 24). The probes cost the target a trap at every op's entry and
// return, a cost set by the machine (1 to 15 us a trap), so the only lever is how long they
// are in, and how often they are moved: linking and removing uprobes takes tprof's CPU by the
// site (~0.3 s for all of torch 1.13's ~7,300 on the 2-vCPU test VM; a window links only the
// ops called so far, TargetRecording::open_op_window), which the estimate counts too. The cost it
// is given is measured from the target's CPU per step where it steps (StepCostMeter). A window of ops
// opens once the slowdown allowed so far covers what the last window cost (putting the probes
// in and taking them out included). Once it holds one whole step (or after a fixed time while
// no step is known) it closes if its probes cost more than the budget's rate or the budget is
// spent; and at once if it overdraws. With --schedule a window opens only for a cycle still to
// come, and stays until that cycle's last step has ended (or it overdraws): the budget then
// skips the cycles it cannot pay for.
#pragma once

#include <cstdint>
#include <optional>

namespace tprof {

class OverheadBudget {
 public:
  // A window costs this much before the first has been measured: on the test VM, ~40 ms of
  // tprof's CPU for the first window's ~1,400 sites (every autograd node class's), and a few
  // steps' traps; more on a loop that has called more ops.
  static constexpr double kFirstWindowCostNs = 100e6;
  // While no step is known, windows are this long.
  static constexpr uint64_t kTimedWindowNs = 50'000'000;
  // A window may spend what this much of the target's CPU time allows ahead of its allowance.
  static constexpr double kOverdraftCpuNs = 10e9;
  // Optimizer.step calls after a window opened that guarantee a whole step inside it: the
  // first may close the step begun before the window, the second ends a whole one, and the
  // third is named only once the step after that one has begun (the step's end).
  static constexpr uint64_t kStepsForOneWhole = 3;

  // The cumulative figures of the recording so far.
  struct Reading {
    uint64_t now_ns = 0;            // monotonic
    // StepCostMeter's: measured in windows where the target steps; elsewhere traps x calibrated
    // costs + BPF run time + tprof's CPU moving the probes.
    double probe_cost_ns = 0;
    uint64_t target_cpu_ns = 0;     // the target's CPU time, probes included
    uint64_t exact_steps = 0;       // whole steps a window saw, once ended (the span closer's)
    uint64_t optimizer_steps = 0;   // Optimizer.step calls (counted in BPF, without the lag)
  };
  enum class Decision { kKeep, kOpen, kClose };
  // --schedule: the schedule, not the budget, says how long a window stays; the budget says
  // whether one may open, and closes it early only if it overdraws.
  struct Scheduled {
    bool cycle_due = false;       // a cycle none of whose steps has begun is about to
    bool none_left = false;       // no cycle is left: the schedule's repeat=R cycles are past
    bool cycle_recorded = false;  // the open window's cycle has ended its last step
  };

  // `max_slowdown`: 0.05 keeps the target at least 1/1.05 of its detached speed.
  explicit OverheadBudget(double max_slowdown) : max_slowdown_(max_slowdown) {}

  Decision decide(const Reading& reading, bool window_open, const std::optional<Scheduled>& scheduled = {});
  // The window decide() asked for is open now, every probe in.
  void opened(const Reading& reading);

  // The slowdown the probes are estimated to have cost: cost / (CPU time without it).
  static double slowdown(double probe_cost_ns, uint64_t target_cpu_ns);

 private:
  double allowance_ns(uint64_t target_cpu_ns) const;  // what the probes may have cost by now

  const double max_slowdown_;
  double window_cost_ns_ = kFirstWindowCostNs;  // what the last window cost, all told
  double close_cost_ns_ = 0;         // of which taking its probes out
  double cost_before_open_ns_ = 0;   // when the last window was asked for
  double cost_at_close_ns_ = 0;      // when it was closed
  bool closing_measured_ = false;    // a window closed since the last reading
  // The window open now: when it opened (its probes all in), and the figures then.
  uint64_t opened_ns_ = 0;
  double cost_at_open_ns_ = 0;
  uint64_t cpu_at_open_ns_ = 0;
  uint64_t exact_steps_at_open_ = 0;
  uint64_t optimizer_steps_at_open_ = 0;
};

}  // namespace tprof
