#include "userspace/session/step_cost_meter.h"

#include <algorithm>

namespace tprof {

void StepCostMeter::add(const Sample& sample, bool probes_in) {
  if (sample.target_cpu_ns >= last_.target_cpu_ns && sample.steps >= last_.steps) {
    Side& side = probes_were_in_ || probes_in ? inside_ : outside_;
    side.cpu_ns += sample.target_cpu_ns - last_.target_cpu_ns;
    side.steps += sample.steps - last_.steps;
    side.estimated_cost_ns += std::max(sample.estimated_cost_ns - last_.estimated_cost_ns, 0.0);
  }
  last_ = sample;
  probes_were_in_ = probes_in;
}

double StepCostMeter::excess_ns() const {
  const double outside_per_step = static_cast<double>(outside_.cpu_ns) / static_cast<double>(outside_.steps);
  return static_cast<double>(inside_.cpu_ns) - static_cast<double>(inside_.steps) * outside_per_step;
}

double StepCostMeter::cost_ns() const {
  if (const auto measured = step_cost()) return measured->cost_ns();
  return outside_.estimated_cost_ns + inside_.estimated_cost_ns;
}

std::optional<model::OpWindows::StepCost> StepCostMeter::step_cost() const {
  if (!measured()) return std::nullopt;
  return model::OpWindows::StepCost{.steps_inside = inside_.steps,
                                    .steps_outside = outside_.steps,
                                    .cpu_inside_ns = inside_.cpu_ns,
                                    .cpu_outside_ns = outside_.cpu_ns,
                                    .excess_inside_ns = excess_ns(),
                                    .estimated_inside_ns = inside_.estimated_cost_ns,
                                    .estimated_outside_ns = outside_.estimated_cost_ns};
}

}  // namespace tprof
