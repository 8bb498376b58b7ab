#include "userspace/session/overhead_budget.h"

#include <algorithm>

namespace tprof {

double OverheadBudget::slowdown(double probe_cost_ns, uint64_t target_cpu_ns) {
  const double without_probes = static_cast<double>(target_cpu_ns) - probe_cost_ns;
  return without_probes > 0 ? probe_cost_ns / without_probes : 0;
}

// cost / (cpu - cost) <= P  <=>  cost <= cpu * P / (1 + P).
double OverheadBudget::allowance_ns(uint64_t target_cpu_ns) const {
  return static_cast<double>(target_cpu_ns) * max_slowdown_ / (1 + max_slowdown_);
}

OverheadBudget::Decision OverheadBudget::decide(const Reading& reading, bool window_open,
                                               const std::optional<Scheduled>& scheduled) {
  const double allowance = allowance_ns(reading.target_cpu_ns);
  if (!window_open) {
    if (closing_measured_) {
      // The first reading after a close holds all the last window cost, its probes' removal too.
      window_cost_ns_ = std::max(reading.probe_cost_ns - cost_before_open_ns_, 0.0);
      close_cost_ns_ = std::max(reading.probe_cost_ns - cost_at_close_ns_, 0.0);
      closing_measured_ = false;
    }
    if (scheduled && !scheduled->cycle_due) return Decision::kKeep;
    if (allowance - reading.probe_cost_ns < window_cost_ns_) return Decision::kKeep;
    cost_before_open_ns_ = reading.probe_cost_ns;
    return Decision::kOpen;
  }
  const bool whole_step = reading.exact_steps > exact_steps_at_open_ ||
                          reading.optimizer_steps >= optimizer_steps_at_open_ + kStepsForOneWhole;
  const bool timed_out = reading.optimizer_steps == 0 && reading.now_ns - opened_ns_ >= kTimedWindowNs;
  const bool overdrawn = reading.probe_cost_ns > allowance + kOverdraftCpuNs * max_slowdown_;
  // Once it holds a whole step, a window stays while its probes cost no more than the budget's
  // rate and the budget still pays for closing it: moving the probes costs more than a cheap
  // loop's traps.
  const bool too_dear = reading.probe_cost_ns - cost_at_open_ns_ >
                        allowance_ns(reading.target_cpu_ns - std::min(reading.target_cpu_ns, cpu_at_open_ns_));
  const bool spent = reading.probe_cost_ns + close_cost_ns_ >= allowance;
  const bool done = scheduled ? scheduled->cycle_recorded || timed_out : (whole_step || timed_out) && (too_dear || spent);
  if (!overdrawn && !done) return Decision::kKeep;
  cost_at_close_ns_ = reading.probe_cost_ns;
  closing_measured_ = true;
  return Decision::kClose;
}

void OverheadBudget::opened(const Reading& reading) {
  opened_ns_ = reading.now_ns;
  cost_at_open_ns_ = reading.probe_cost_ns;
  cpu_at_open_ns_ = reading.target_cpu_ns;
  exact_steps_at_open_ = reading.exact_steps;
  optimizer_steps_at_open_ = reading.optimizer_steps;
}

}  // namespace tprof
