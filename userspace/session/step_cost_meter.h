// --max-overhead: what the windows of op probes cost the target, measured rather than estimated.
// The trap estimate (TrapCosts: traps x a trap's cost measured in tprof's own process) counts
// what the kernel does at each trap, but not the target's own code running slower while the
// probes fire (caches and TLB refilled after each trap): on the test VM, a --schedule run at 20%
// slowed the loop 28-33% against an estimate of 20% (docs/BENCHMARKS.md). Where the target
// calls Optimizer.step, its CPU time per step outside windows is the price of a step without
// op probes; a window's steps cost more, and the difference is what the window cost, whatever
// it was spent on.
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

  // What the probes cost the target so far: outside windows, the trap estimate (the stack
  // sampler's interrupts and the step markers' traps); inside, the measured excess once both
  // sides have enough steps, the trap estimate until then.
  double cost_ns() const;
  // The figures behind it; none until the measurement stands.
  std::optional<model::OpWindows::StepCost> step_cost() const;

 private:
  bool measured() const { return inside_.steps >= kStepsInside && outside_.steps >= kStepsOutside; }
  // The target's CPU in windows above what their steps take outside them (negative: noise).
  double excess_ns() const;

  struct Side {
    uint64_t cpu_ns = 0;
    uint64_t steps = 0;
    double estimated_cost_ns = 0;
  };
  Sample last_;  // the previous reading's
  bool probes_were_in_ = false;
  Side inside_, outside_;
};

}  // namespace tprof
