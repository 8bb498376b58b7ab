// --max-overhead: what the windows of op probes cost the target, measured as well as estimated.
// The trap estimate (TrapCosts: traps x a trap's cost measured in tprof's own process) counts
// what the kernel does at each trap, not what else the probes slow (the target's own code,
// its caches refilled after each trap), and it counts tprof's CPU putting the probes in and out
// as the target's, though it runs beside it. Where the target calls Optimizer.step, its CPU
// time per step outside windows is the price of a step without op probes; a window's steps
// cost more, and the difference is what the window cost, whatever it was spent on. That misses
// what slows the steps between windows too (tprof's own work on a CPU that shares a core with
// the target's). On the test VM the two differ by up to a quarter, either way, and the slowdown
// measured from outside was often above both (docs/BENCHMARKS.md, fourth pass): the cost is the
// larger.
#pragma once

#include <cstdint>
#include <optional>

#include "model/trace_model.h"

namespace tprof {

class StepCostMeter {
 public:
  // Steps each side must have seen before the measurement stands: inside, one window's whole
  // step (OverheadBudget::kStepsForOneWhole); outside, enough that one step's worth of jitter
  // at the edges of the intervals is a few percent of the rate.
  static constexpr uint64_t kStepsInside = 3;
  static constexpr uint64_t kStepsOutside = 30;
  // The readings from one that saw steps to the next that does are a stretch. It is a phase
  // without steps (an evaluation, a checkpoint; the first stretch, which began before the first
  // step seen) when its CPU would pay for this many steps more than it ran, and for this long
  // at least (a loop of 0.4 ms steps stalls for a few ms now and then): its CPU per step would
  // skew the side it fell on, so it is costed by the trap estimate instead.
  static constexpr uint64_t kStepsOfAPause = 10;
  static constexpr double kShortestPauseNs = 200e6;

  // The cumulative figures at one reading, from the start of the recording (when no window was
  // open).
  struct Sample {
    uint64_t target_cpu_ns = 0;
    uint64_t steps = 0;            // Optimizer.step calls so far
    double estimated_cost_ns = 0;  // the trap estimate so far, every probe's (TrapCosts)
  };

  // Each reading, with whether the op probes are in now. The interval since the last reading
  // counts as inside a window if they were in at either end: while they are put in or taken
  // out, some are.
  void add(const Sample& sample, bool probes_in);

  // What the probes cost the target so far: outside windows and in phases without steps, the
  // trap estimate (outside: the step markers' traps); inside, the larger of the measured excess
  // and the trap estimate once both sides have enough steps, the trap estimate until then.
  double cost_ns() const;
  // The figures behind it; none until the measurement stands.
  std::optional<model::OpWindows::StepCost> step_cost() const;

 private:
  bool measured() const { return inside_.steps >= kStepsInside && outside_.steps >= kStepsOutside; }
  // The target's CPU in windows above what their steps take outside them (negative: noise).
  double excess_ns() const;
  // The trap estimate of all but the windows' settled steps.
  double rest_estimate_ns() const;

  struct Side {
    uint64_t cpu_ns = 0;
    uint64_t steps = 0;
    double estimated_cost_ns = 0;
    Side& operator+=(const Side& other);
  };
  // The stretch since the last reading that saw steps goes to its sides, or to the pauses.
  void settle();
  bool stretch_is_a_pause() const;

  Sample last_;  // the previous reading's
  bool probes_were_in_ = false;
  Side inside_, outside_;
  Side pending_inside_, pending_outside_;  // since the last reading that saw steps
  Side pauses_;                            // phases without steps, both sides
  bool settled_once_ = false;              // the first stretch, before any step seen, is a pause
};

}  // namespace tprof
