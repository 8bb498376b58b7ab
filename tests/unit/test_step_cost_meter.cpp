// StepCostMeter: the windows' cost from the target's CPU per step inside them against outside.
#include "userspace/session/step_cost_meter.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace tprof {
namespace {

// A loop whose steps take `outside_step_ns` of CPU without op probes and `inside_step_ns` with
// them, read every `steps_a_reading` steps; the trap estimate grows by `estimate_per_step_ns`
// a step inside and 1 us a step outside (the step markers).
class Loop {
 public:
  Loop(uint64_t outside_step_ns, uint64_t inside_step_ns, double estimate_per_step_ns)
      : outside_step_ns_(outside_step_ns), inside_step_ns_(inside_step_ns), estimate_per_step_ns_(estimate_per_step_ns) {}

  void run(StepCostMeter& meter, uint64_t steps, bool probes_in) {
    cpu_ns_ += steps * (probes_in ? inside_step_ns_ : outside_step_ns_);
    steps_ += steps;
    estimate_ns_ += static_cast<double>(steps) * (probes_in ? estimate_per_step_ns_ : 1'000.0);
    meter.add({.target_cpu_ns = cpu_ns_, .steps = steps_, .estimated_cost_ns = estimate_ns_}, probes_in);
  }
  // CPU without a step (an evaluation), read every 20 ms, the traps costing `estimate_ns` in all.
  void pause(StepCostMeter& meter, uint64_t cpu_ns, double estimate_ns, bool probes_in) {
    constexpr uint64_t kReading = 20'000'000;
    for (uint64_t spent = 0; spent < cpu_ns; spent += kReading) {
      const uint64_t now = std::min(kReading, cpu_ns - spent);
      cpu_ns_ += now;
      estimate_ns_ += estimate_ns * static_cast<double>(now) / static_cast<double>(cpu_ns);
      meter.add({.target_cpu_ns = cpu_ns_, .steps = steps_, .estimated_cost_ns = estimate_ns_}, probes_in);
    }
  }
  // The first stretch, begun before the first step seen, is a pause: one step of it.
  void begin(StepCostMeter& meter) { run(meter, 1, false); }
  double estimate_ns() const { return estimate_ns_; }

 private:
  uint64_t outside_step_ns_, inside_step_ns_;
  double estimate_per_step_ns_;
  uint64_t cpu_ns_ = 0, steps_ = 0;
  double estimate_ns_ = 0;
};

TEST(StepCostMeter, IsTheTrapEstimateUntilEachSideHasEnoughSteps) {
  StepCostMeter meter;
  Loop loop(100'000, 400'000, 150'000);
  loop.run(meter, StepCostMeter::kStepsOutside - 1, false);
  loop.run(meter, 10, true);
  loop.run(meter, 0, false);  // closed: the interval it closed in is still the window's
  EXPECT_FALSE(meter.step_cost().has_value());
  EXPECT_DOUBLE_EQ(meter.cost_ns(), loop.estimate_ns());
}

// The traps say 150 us a step inside; the steps took 300 us more than outside: the measure counts.
TEST(StepCostMeter, MeasuresWhatTheWindowsStepsTookAboveTheOthers) {
  StepCostMeter meter;
  Loop loop(100'000, 400'000, 150'000);
  loop.begin(meter);
  loop.run(meter, 40, false);
  loop.run(meter, 0, true);   // opened: the probes went in after this reading
  loop.run(meter, 4, true);
  loop.run(meter, 0, false);  // closed
  loop.run(meter, 20, false);
  const auto cost = meter.step_cost();
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->steps_inside, 4u);
  EXPECT_EQ(cost->steps_outside, 60u);
  EXPECT_EQ(cost->cpu_inside_ns, 1'600'000u);
  EXPECT_EQ(cost->cpu_outside_ns, 6'000'000u);
  EXPECT_DOUBLE_EQ(cost->excess_inside_ns, 1'200'000.0);
  EXPECT_EQ(cost->cpu_in_pauses_ns, 100'000u);  // the first stretch's
  EXPECT_DOUBLE_EQ(cost->estimated_inside_ns, 600'000.0);
  EXPECT_DOUBLE_EQ(cost->estimated_rest_ns, 61'000.0);
  EXPECT_DOUBLE_EQ(meter.cost_ns(), 1'261'000.0);
}

// The steps measure 50 us dearer in windows, the traps say 200 us: the larger counts.
TEST(StepCostMeter, CountsTheTrapEstimateWhereItIsTheLarger) {
  StepCostMeter meter;
  Loop loop(100'000, 150'000, 200'000);
  loop.begin(meter);
  loop.run(meter, 40, false);
  loop.run(meter, 4, true);
  loop.run(meter, 0, false);
  const auto cost = meter.step_cost();
  ASSERT_TRUE(cost.has_value());
  EXPECT_DOUBLE_EQ(cost->excess_inside_ns, 200'000.0);
  EXPECT_DOUBLE_EQ(cost->estimated_inside_ns, 800'000.0);
  EXPECT_DOUBLE_EQ(meter.cost_ns(), 41'000.0 + 800'000.0);
}

// Where the probes are in at either end of an interval, some were in during it.
TEST(StepCostMeter, CountsTheIntervalsThatPutTheProbesInOrOutAsInside) {
  StepCostMeter meter;
  Loop loop(100'000, 100'000, 0);
  loop.begin(meter);
  loop.run(meter, 40, false);
  loop.run(meter, 2, true);   // being put in
  loop.run(meter, 3, false);  // taken out at the reading before
  loop.run(meter, 5, false);
  const auto cost = meter.step_cost();
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->steps_inside, 5u);
  EXPECT_EQ(cost->steps_outside, 45u);
}

TEST(StepCostMeter, KeepsANegativeExcessButCostsItAsNothing) {
  StepCostMeter meter;
  Loop loop(100'000, 90'000, 0);
  loop.begin(meter);
  loop.run(meter, 40, false);
  loop.run(meter, 4, true);
  loop.run(meter, 0, false);
  const auto cost = meter.step_cost();
  ASSERT_TRUE(cost.has_value());
  EXPECT_DOUBLE_EQ(cost->excess_inside_ns, -40'000.0);
  EXPECT_DOUBLE_EQ(meter.cost_ns(), 41'000.0);  // the markers' traps outside
}

// A 5 s evaluation between windows would make a step outside look 5 s dearer, and the windows
// free: it is left out of the rates, its traps costed by the estimate.
TEST(StepCostMeter, LeavesAPauseBetweenWindowsOutOfTheRates) {
  StepCostMeter meter;
  Loop loop(100'000, 400'000, 150'000);
  loop.begin(meter);
  loop.run(meter, 40, false);
  loop.pause(meter, 5'000'000'000, 2'000.0, false);
  loop.run(meter, 1, false);  // the first step after it ends the pause's stretch
  loop.run(meter, 4, true);
  loop.run(meter, 0, false);
  const auto cost = meter.step_cost();
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->steps_outside, 40u);
  EXPECT_EQ(cost->cpu_outside_ns, 4'000'000u);
  EXPECT_EQ(cost->cpu_in_pauses_ns, 5'000'200'000u);
  EXPECT_DOUBLE_EQ(cost->excess_inside_ns, 1'200'000.0);
  EXPECT_DOUBLE_EQ(cost->estimated_rest_ns, 44'000.0);  // 42 steps' markers and the pause's 2 us
}

// The same inside a window that stays open across it: the window's steps keep their rate, and
// the pause's traps count at the estimate.
TEST(StepCostMeter, LeavesAPauseInsideAWindowOutOfTheRates) {
  StepCostMeter meter;
  Loop loop(100'000, 400'000, 150'000);
  loop.begin(meter);
  loop.run(meter, 40, false);
  loop.run(meter, 4, true);
  loop.pause(meter, 5'000'000'000, 500'000'000.0, true);
  loop.run(meter, 1, true);
  loop.run(meter, 0, false);
  const auto cost = meter.step_cost();
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->steps_inside, 4u);
  EXPECT_EQ(cost->cpu_inside_ns, 1'600'000u);
  EXPECT_DOUBLE_EQ(cost->excess_inside_ns, 1'200'000.0);
  EXPECT_DOUBLE_EQ(meter.cost_ns(), 1'200'000.0 + 41'000.0 + 500'000'000.0 + 150'000.0);
}

// A loop of 0.1 ms steps that stalls for 50 ms (more than 10 of its steps) has not paused.
TEST(StepCostMeter, AShortStallIsNoPause) {
  StepCostMeter meter;
  Loop loop(100'000, 400'000, 150'000);
  loop.begin(meter);
  loop.run(meter, 40, false);
  loop.pause(meter, 50'000'000, 0, false);
  loop.run(meter, 1, false);
  loop.run(meter, 4, true);
  loop.run(meter, 0, false);
  const auto cost = meter.step_cost();
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->steps_outside, 41u);
  EXPECT_EQ(cost->cpu_outside_ns, 54'100'000u);
  EXPECT_EQ(cost->cpu_in_pauses_ns, 100'000u);
}

// A target's CPU time that went back (a re-read after it exited) is not an interval.
TEST(StepCostMeter, IgnoresAReadingThatWentBack) {
  StepCostMeter meter;
  meter.add({.target_cpu_ns = 1'000'000, .steps = 10, .estimated_cost_ns = 0}, false);  // the first stretch
  meter.add({.target_cpu_ns = 5'000'000, .steps = 50, .estimated_cost_ns = 0}, false);
  meter.add({.target_cpu_ns = 4'000'000, .steps = 50, .estimated_cost_ns = 0}, true);
  meter.add({.target_cpu_ns = 6'000'000, .steps = 60, .estimated_cost_ns = 0}, true);
  const auto cost = meter.step_cost();
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(cost->cpu_inside_ns, 2'000'000u);
  EXPECT_EQ(cost->cpu_outside_ns, 4'000'000u);
}

}  // namespace
}  // namespace tprof
