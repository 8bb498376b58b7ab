#include "userspace/session/step_cost_meter.h"

#include <algorithm>
#include <utility>

namespace tprof {

StepCostMeter::Side& StepCostMeter::Side::operator+=(const Side& other) {
  cpu_ns += other.cpu_ns;
  steps += other.steps;
  estimated_cost_ns += other.estimated_cost_ns;
  return *this;
}

void StepCostMeter::add(const Sample& sample, bool probes_in) {
  if (sample.target_cpu_ns >= last_.target_cpu_ns && sample.steps >= last_.steps) {
    const Side interval{.cpu_ns = sample.target_cpu_ns - last_.target_cpu_ns,
                        .steps = sample.steps - last_.steps,
                        .estimated_cost_ns = std::max(sample.estimated_cost_ns - last_.estimated_cost_ns, 0.0)};
    (probes_were_in_ || probes_in ? pending_inside_ : pending_outside_) += interval;
    if (interval.steps > 0) settle();
  }
  last_ = sample;
  probes_were_in_ = probes_in;
}

// A stretch is a pause when its CPU exceeds what its steps take at the rate so far of the side
// each fell on (a window's steps cost several times the others') by kStepsOfAPause steps, and
// by kShortestPauseNs at least. With no rate yet for a side the stretch fell on, it is not
// judged: a step's worth of stretch is usual.
bool StepCostMeter::stretch_is_a_pause() const {
  if (!settled_once_) return true;
  double steps_ns = 0, pause_ns = kShortestPauseNs;
  for (const auto& [pending, settled] : {std::pair{&pending_inside_, &inside_}, std::pair{&pending_outside_, &outside_}}) {
    if (pending->cpu_ns == 0) continue;
    if (settled->steps == 0) return false;
    const double step_ns = static_cast<double>(settled->cpu_ns) / static_cast<double>(settled->steps);
    steps_ns += static_cast<double>(pending->steps) * step_ns;
    pause_ns = std::max(pause_ns, static_cast<double>(kStepsOfAPause) * step_ns);
  }
  return static_cast<double>(pending_inside_.cpu_ns + pending_outside_.cpu_ns) > steps_ns + pause_ns;
}

void StepCostMeter::settle() {
  if (stretch_is_a_pause()) {
    pauses_ += pending_inside_;
    pauses_ += pending_outside_;
  } else {
    inside_ += pending_inside_;
    outside_ += pending_outside_;
  }
  pending_inside_ = pending_outside_ = Side{};
  settled_once_ = true;
}

double StepCostMeter::excess_ns() const {
  const double outside_per_step = static_cast<double>(outside_.cpu_ns) / static_cast<double>(outside_.steps);
  return static_cast<double>(inside_.cpu_ns) - static_cast<double>(inside_.steps) * outside_per_step;
}

// The stretch still pending (since the last step) is costed as a pause would be.
double StepCostMeter::rest_estimate_ns() const {
  return outside_.estimated_cost_ns + pauses_.estimated_cost_ns + pending_inside_.estimated_cost_ns +
         pending_outside_.estimated_cost_ns;
}

double StepCostMeter::cost_ns() const {
  if (const auto measured = step_cost()) return measured->cost_ns();
  return inside_.estimated_cost_ns + rest_estimate_ns();
}

std::optional<model::OpWindows::StepCost> StepCostMeter::step_cost() const {
  if (!measured()) return std::nullopt;
  return model::OpWindows::StepCost{.steps_inside = inside_.steps,
                                    .steps_outside = outside_.steps,
                                    .cpu_inside_ns = inside_.cpu_ns,
                                    .cpu_outside_ns = outside_.cpu_ns,
                                    .excess_inside_ns = excess_ns(),
                                    .cpu_in_pauses_ns = pauses_.cpu_ns + pending_inside_.cpu_ns + pending_outside_.cpu_ns,
                                    .estimated_inside_ns = inside_.estimated_cost_ns,
                                    .estimated_rest_ns = rest_estimate_ns()};
}

}  // namespace tprof
