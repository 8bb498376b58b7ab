// The plan of a libtorch_cpu file, made once per session and shared by every target that maps
// the file (the ranks of a job), whatever path each reaches it by; a plan with shapes and one
// without are different plans. Checked on the real libraries (Debian's torch 1.13, torch 2.6
// in the trixie root). With a plan cache, the next session reads the plan back instead.
#include "userspace/session/torch_library_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/support/process_harness.h"
#include "tests/support/torch_libraries.h"
#include "userspace/session/plan_cache.h"

namespace tprof {
namespace {

class TorchLibraryPlanTest : public ::testing::TestWithParam<testing::TorchInstall> {
 protected:
  void SetUp() override {
    if (const auto missing = GetParam().missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  }

  // The library as a target maps it, opened through `prefix` (another root, as a container's
  // /proc/PID/root).
  static MappedLibrary mapped(const std::string& prefix) {
    const std::string path = GetParam().library("libtorch_cpu");
    return {.path_in_target = path, .host_path = prefix + path, .load_address = 0x7f0000000000};
  }

  Console console_{/*quiet=*/true};
};

TEST_P(TorchLibraryPlanTest, IsMadeOncePerFileAndShapesSetting) {
  TorchLibraryPlans plans;
  const auto [first, first_source] = plans.plan_for(mapped(""), /*record_shapes=*/true, console_);
  EXPECT_EQ(first_source, PlanSource::kPlanned);
  const auto through_another_root = plans.plan_for(mapped("/proc/self/root"), true, console_);
  EXPECT_EQ(first.get(), through_another_root.plan.get()) << "one plan for one file, whatever the path";
  EXPECT_EQ(through_another_root.source, PlanSource::kSession);
  const auto without_shapes = plans.plan_for(mapped(""), /*record_shapes=*/false, console_).plan;
  EXPECT_NE(first.get(), without_shapes.get());

  const TorchLibraryPlan& plan = *first;
  EXPECT_GT(plan.plan.sites.offsets.size(), 2000u);
  EXPECT_EQ(plan.plan.sites.offsets.size(), plan.plan.operators.size());
  EXPECT_EQ(plan.argument_plans.size(), plan.plan.catalog_entries.size()) << "one argument plan per ATen op";
  EXPECT_LT(plan.argument_plans.size(), plan.plan.operators.size()) << "named scopes follow the ops, without plans";
  const auto& operators = plan.plan.operators;
  EXPECT_TRUE(std::any_of(operators.begin(), operators.end(), [](const model::Operator& op) { return op.name == "detach"; }))
      << "autograd's named scope";
  EXPECT_GT(plan.returns.offsets.size(), plan.plan.sites.offsets.size() / 2);
  EXPECT_EQ(plan.returns.functions.size(), plan.returns.offsets.size());
  EXPECT_FALSE(plan.spills.sites.offsets.empty()) << "ops that take doubles";
  EXPECT_FALSE(plan.ranges->range_function_addresses().empty()) << "the autograd engine's functions";

  EXPECT_TRUE(without_shapes->argument_plans.empty());
  EXPECT_TRUE(without_shapes->spills.sites.offsets.empty());
  EXPECT_EQ(without_shapes->plan.sites.offsets, plan.plan.sites.offsets) << "the same sites";
}

TEST_P(TorchLibraryPlanTest, TheNextSessionReadsItsPlanFromTheCache) {
  test::ScratchDirectory scratch;
  const std::string directory = (scratch.path() / "plans").string();
  TorchLibraryPlans first_session(std::make_unique<PlanCache>(directory));
  const auto made = first_session.plan_for(mapped(""), /*record_shapes=*/true, console_);
  EXPECT_EQ(made.source, PlanSource::kPlanned);
  TorchLibraryPlans next_session(std::make_unique<PlanCache>(directory));
  const auto read_back = next_session.plan_for(mapped(""), /*record_shapes=*/true, console_);
  EXPECT_EQ(read_back.source, PlanSource::kPlanCache);
  EXPECT_EQ(read_back.plan->plan.sites.offsets, made.plan->plan.sites.offsets);
  EXPECT_EQ(read_back.plan->notes, made.plan->notes) << "said again";
  EXPECT_EQ(next_session.plan_for(mapped(""), true, console_).source, PlanSource::kSession);
}

INSTANTIATE_TEST_SUITE_P(Torch, TorchLibraryPlanTest,
                         ::testing::Values(testing::debian_torch113(), testing::trixie_torch26(), testing::sid_torch214()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tprof
