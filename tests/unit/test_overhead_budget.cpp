// --max-overhead's budget: when a window of ops opens (once the allowance so far pays for what
// the last one cost), how long it stays (a whole step, then while its probes cost no more than
// the budget's rate), and when it closes at once (overdrawn).
#include "userspace/session/overhead_budget.h"

#include <gtest/gtest.h>

namespace tprof {
namespace {

using Decision = OverheadBudget::Decision;
constexpr uint64_t kSecond = 1'000'000'000;

OverheadBudget::Reading at(double cpu_s, double cost_ms, uint64_t optimizer_steps = 0, uint64_t exact_steps = 0) {
  return {.now_ns = static_cast<uint64_t>(cpu_s * kSecond),
          .probe_cost_ns = cost_ms * 1e6,
          .target_cpu_ns = static_cast<uint64_t>(cpu_s * kSecond),
          .exact_steps = exact_steps,
          .optimizer_steps = optimizer_steps};
}

TEST(OverheadBudget, TheSlowdownIsTheCostOverTheTimeWithoutIt) {
  EXPECT_DOUBLE_EQ(OverheadBudget::slowdown(50e6, 1'050'000'000), 0.05);
  EXPECT_DOUBLE_EQ(OverheadBudget::slowdown(0, 0), 0);
}

// At 5%, what the probes may cost by t is t * 0.05 / 1.05: the first window (100 ms, its cost
// unknown yet) waits for 2.1 s of the target's CPU.
TEST(OverheadBudget, TheFirstWindowWaitsUntilTheAllowancePaysForIt) {
  OverheadBudget budget(0.05);
  EXPECT_EQ(budget.decide(at(2.0, 0), false), Decision::kKeep);
  EXPECT_EQ(budget.decide(at(2.2, 0), false), Decision::kOpen);
}

// A window of a small-op loop costs far more than the budget's rate: it closes once it holds a
// whole step (the closer's, or three optimizer steps counted in BPF), not before.
TEST(OverheadBudget, ADearWindowClosesOnceItHoldsAWholeStep) {
  OverheadBudget budget(0.05);
  ASSERT_EQ(budget.decide(at(10, 100, 500), false), Decision::kOpen);
  budget.opened(at(10.1, 150, 510));
  EXPECT_EQ(budget.decide(at(10.11, 300, 511), true), Decision::kKeep) << "no whole step yet";
  EXPECT_EQ(budget.decide(at(10.12, 320, 512, 0), true), Decision::kKeep);
  EXPECT_EQ(budget.decide(at(10.13, 340, 513, 0), true), Decision::kClose) << "three steps counted";
  ASSERT_EQ(budget.decide(at(10.15, 360, 515, 1), false), Decision::kKeep) << "this window cost 260 ms";
  budget.opened(at(0, 0));  // harmless when closed
}

TEST(OverheadBudget, TheClosersWholeStepClosesADearWindowToo) {
  OverheadBudget budget(0.05);
  ASSERT_EQ(budget.decide(at(10, 100, 500), false), Decision::kOpen);
  budget.opened(at(10.1, 150, 510, 7));
  EXPECT_EQ(budget.decide(at(10.11, 300, 511, 8), true), Decision::kClose);
}

// The next window waits until the allowance has grown by what the last one cost, all told.
TEST(OverheadBudget, TheNextWindowWaitsForWhatTheLastOneCost) {
  OverheadBudget budget(0.05);
  ASSERT_EQ(budget.decide(at(10, 100, 500), false), Decision::kOpen);
  budget.opened(at(10.1, 150, 510));
  ASSERT_EQ(budget.decide(at(10.2, 400, 513), true), Decision::kClose);
  // 500 ms after closing, 600 ms spent: the window cost 500 ms.
  EXPECT_EQ(budget.decide(at(10.7, 600, 520), false), Decision::kKeep);
  // The allowance at t is t / 21: it pays 600 + 500 ms at 23.1 s.
  EXPECT_EQ(budget.decide(at(23.0, 600, 900), false), Decision::kKeep);
  EXPECT_EQ(budget.decide(at(23.2, 600, 905), false), Decision::kOpen);
}

// A compute-heavy loop's window costs less than the budget's rate: it stays, every step exact,
// until the budget is spent.
TEST(OverheadBudget, ACheapWindowStaysWhileTheBudgetLasts) {
  OverheadBudget budget(0.05);
  ASSERT_EQ(budget.decide(at(10, 100, 50), false), Decision::kOpen);
  budget.opened(at(10.1, 400, 51));
  EXPECT_EQ(budget.decide(at(20, 700, 150, 90), true), Decision::kKeep) << "300 ms over 9.9 s: 3%";
  EXPECT_EQ(budget.decide(at(20.1, 990, 151, 91), true), Decision::kClose) << "the allowance, 957 ms, is spent";
}

TEST(OverheadBudget, AnOverdrawnWindowClosesWithoutAWholeStep) {
  OverheadBudget budget(0.05);
  ASSERT_EQ(budget.decide(at(10, 100, 500), false), Decision::kOpen);
  budget.opened(at(10.1, 150, 510));
  // Allowance 481 ms + an overdraft of 10 s x 5%.
  EXPECT_EQ(budget.decide(at(10.2, 950, 511), true), Decision::kKeep);
  EXPECT_EQ(budget.decide(at(10.2, 1000, 511), true), Decision::kClose);
}

// No Optimizer.step seen: windows of a fixed time.
TEST(OverheadBudget, WithoutStepsAWindowLastsAFixedTime) {
  OverheadBudget budget(0.05);
  ASSERT_EQ(budget.decide(at(10, 100), false), Decision::kOpen);
  budget.opened(at(10.1, 150));
  EXPECT_EQ(budget.decide(at(10.14, 300), true), Decision::kKeep);
  EXPECT_EQ(budget.decide(at(10.15, 310), true), Decision::kClose);
}

}  // namespace
}  // namespace tprof

namespace tprof {
namespace {

// --schedule: a window opens only for a cycle that is due, even with budget to spare, and holds
// until its cycle's last step has ended, however dear; only an overdraft closes it sooner.
TEST(OverheadBudget, UnderAScheduleTheCycleSaysWhenAWindowOpensAndCloses) {
  OverheadBudget budget(0.05);
  const OverheadBudget::Scheduled not_due{};
  const OverheadBudget::Scheduled due{.cycle_due = true};
  const OverheadBudget::Scheduled recording{};
  const OverheadBudget::Scheduled recorded{.cycle_recorded = true};
  EXPECT_EQ(budget.decide(at(100, 0, 500), false, not_due), Decision::kKeep) << "budget to spare, no cycle due";
  EXPECT_EQ(budget.decide(at(0.1, 0, 500), false, due), Decision::kKeep) << "a cycle due, no budget yet";
  ASSERT_EQ(budget.decide(at(100, 0, 500), false, due), Decision::kOpen);
  budget.opened(at(100.2, 200, 501));
  EXPECT_EQ(budget.decide(at(100.3, 1000, 520), true, recording), Decision::kKeep)
      << "twenty steps counted and dearer than the rate: the cycle is not over";
  EXPECT_EQ(budget.decide(at(100.4, 1100, 521), true, recorded), Decision::kClose);
}

TEST(OverheadBudget, UnderAScheduleAnOverdrawnWindowClosesBeforeItsCycleEnds) {
  OverheadBudget budget(0.05);
  ASSERT_EQ(budget.decide(at(100, 0, 500), false, OverheadBudget::Scheduled{.cycle_due = true}), Decision::kOpen);
  budget.opened(at(100.2, 200, 501));
  // The allowance at 101 s of CPU is ~4.8 s; the overdraft 10 s x 5% = 0.5 s more.
  EXPECT_EQ(budget.decide(at(101, 5400, 502), true, OverheadBudget::Scheduled{}), Decision::kClose);
}

}  // namespace
}  // namespace tprof
