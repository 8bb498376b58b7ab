// --schedule: the step schedule against torch.profiler.schedule itself (torch 1.13's, run in
// python3) over a grid of parameters, its parsing, and the sink that keeps the recording steps
// and writes one trace per cycle.
#include "userspace/assemble/step_schedule.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recording_sink.h"
#include "tests/support/torch_libraries.h"
#include "userspace/assemble/scheduled_sink.h"

namespace tprof {
namespace {

using Action = StepSchedule::Action;

// torch's ProfilerAction values in the order of StepSchedule::Action.
constexpr const char* kTorchGrid = R"py(
import itertools, sys
from torch.profiler import schedule, ProfilerAction
order = [ProfilerAction.NONE, ProfilerAction.WARMUP, ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE]
for wait, warmup, active, repeat, skip_first in itertools.product(range(3), range(3), range(1, 4), range(3), range(3)):
    fn = schedule(wait=wait, warmup=warmup, active=active, repeat=repeat, skip_first=skip_first)
    print(wait, warmup, active, repeat, skip_first, "".join(str(order.index(fn(step))) for step in range(40)))
)py";

TEST(StepSchedule, AgreesWithTorchsScheduleOverAGrid) {
  std::vector<std::string> command = testing::debian_torch113().python;
  command.insert(command.end(), {"-W", "ignore", "-c", kTorchGrid});
  const test::CommandResult torch = test::run_command(command, std::chrono::seconds(120));
  if (!torch.status || !torch.status->succeeded())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: python3 with torch could not run torch.profiler.schedule; the schedule is "
                    "NOT compared with torch's ***";
  ASSERT_EQ(torch.stdout_lines.size(), 3u * 3 * 3 * 3 * 3);
  size_t compared = 0;
  for (const std::string& line : torch.stdout_lines) {
    std::istringstream fields(line);
    StepSchedule schedule;
    std::string actions;
    fields >> schedule.wait >> schedule.warmup >> schedule.active >> schedule.repeat >> schedule.skip_first >> actions;
    SCOPED_TRACE(schedule.describe());
    ASSERT_EQ(actions.size(), 40u);
    for (uint64_t step = 0; step < 40; ++step) {
      EXPECT_EQ(static_cast<int>(schedule.action(step)), actions[step] - '0') << "step " << step;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 243u * 40);
}

TEST(StepSchedule, ParsesTorchsKeywords) {
  std::string error;
  const auto schedule = StepSchedule::parse("wait=1,warmup=2,active=3,repeat=4,skip_first=5", &error);
  ASSERT_TRUE(schedule.has_value()) << error;
  EXPECT_EQ(schedule->describe(), "wait=1,warmup=2,active=3,repeat=4,skip_first=5");
  const auto defaults = StepSchedule::parse("active=2,wait=0,warmup=1", &error);
  ASSERT_TRUE(defaults.has_value()) << error;
  EXPECT_EQ(defaults->describe(), "wait=0,warmup=1,active=2,repeat=0,skip_first=0");
}

TEST(StepSchedule, RefusesWhatTorchRefusesWithAReason) {
  const std::map<std::string, std::string> refused = {
      {"wait=1,warmup=1", "missing active=N"},
      {"wait=1,warmup=1,active=0", "active must be at least 1"},
      {"wait=1,warmup=1,active=x", "'active=x': active takes a whole number"},
      {"wait=1,warmup=1,active=2,every=3", "'every=3' is not one of"},
      {"wait=-1,warmup=1,active=2", "'wait=-1': wait takes a whole number"},
      {"", "missing wait=N"}};
  for (const auto& [text, reason] : refused) {
    std::string error;
    EXPECT_FALSE(StepSchedule::parse(text, &error).has_value()) << text;
    EXPECT_NE(error.find(reason), std::string::npos) << text << ": " << error;
  }
}

// ---- the sink ---------------------------------------------------------------------------------

// What one cycle received; the test keeps it after the sink has let its cycle go.
struct CycleRecord {
  std::string name;
  test::RecordingSink recorded;
  bool committed = false;
  bool removed = false;
};

struct FakeCycle final : ScheduledSink::Cycle {
  explicit FakeCycle(CycleRecord& record) : record(record) {}
  model::TraceSink& sink() override { return record.recorded; }
  void commit() override { record.committed = true; }
  std::string written() const override { return record.name; }
  void remove() override { record.removed = true; }
  CycleRecord& record;
};

struct ScheduledRun {
  explicit ScheduledRun(const std::string& schedule_text, size_t max_cycles_kept = 0, bool whole_cycles_only = false) {
    std::string error;
    sink = std::make_unique<ScheduledSink>(
        *StepSchedule::parse(schedule_text, &error),
        [this] {
          cycles.push_back(std::make_unique<CycleRecord>());
          cycles.back()->name = "cycle" + std::to_string(cycles.size() - 1);
          return std::make_unique<FakeCycle>(*cycles.back());
        },
        [](uint64_t, uint64_t end_ns) { return model::RunSummary{.window_end_unix_ns = end_ns}; }, every_cycle,
        max_cycles_kept, whole_cycles_only);
    sink->begin({});
    sink->thread({.tid = 7, .name = "main", .entry_id = 1});
  }

  // Step `step` on thread 7 from `start` to `start + 10`: one op, then its ProfilerStep range.
  void run_step(uint64_t step, uint64_t start) {
    model::OpSpan op{.start_ns = start + 1, .end_ns = start + 9, .operator_index = 0, .step = step};
    sink->op({7, op, kOp});
    model::OpSpan range{.start_ns = start, .end_ns = start + 10, .operator_index = 1, .step = step};
    const model::Operator name{"ProfilerStep#" + std::to_string(step), "", model::RangeKind::kUserAnnotation};
    sink->op({7, range, name});
  }

  std::vector<std::string> written() const { return {sink->written().begin(), sink->written().end()}; }

  static std::vector<std::string> names(const CycleRecord& cycle) {
    std::vector<std::string> names;
    for (const auto& op : cycle.recorded.ops) names.push_back(op.name);
    return names;
  }

  inline static const model::Operator kOp{"aten::mm", ""};
  std::vector<std::unique_ptr<CycleRecord>> cycles;
  test::RecordingSink every_cycle;
  std::unique_ptr<ScheduledSink> sink;
};

TEST(ScheduledSink, WritesEachCycleOfTheRecordingStepsOnceItsLastStepCloses) {
  ScheduledRun run("wait=1,warmup=1,active=2,repeat=2");
  for (uint64_t step = 0; step < 12; ++step) {
    run.run_step(step, 100 * step);
    if (step == 3) {
      ASSERT_EQ(run.written(), std::vector<std::string>{"cycle0"});  // written at step 3's end
      EXPECT_FALSE(run.sink->done());
    }
  }
  EXPECT_TRUE(run.sink->done());
  EXPECT_EQ(run.written(), (std::vector<std::string>{"cycle0", "cycle1"}));
  run.sink->finish({});
  EXPECT_EQ(run.sink->written().size(), 2u) << "nothing after the last cycle";
}

TEST(ScheduledSink, ACycleHoldsItsActiveStepsAndTheThreadsAnnouncedBefore) {
  ScheduledRun run("wait=1,warmup=1,active=2,repeat=2");
  for (uint64_t step = 0; step < 8; ++step) run.run_step(step, 100 * step);
  ASSERT_EQ(run.cycles.size(), 2u);
  EXPECT_EQ(ScheduledRun::names(*run.cycles[0]),
            (std::vector<std::string>{"aten::mm", "ProfilerStep#2", "aten::mm", "ProfilerStep#3"}));
  EXPECT_EQ(ScheduledRun::names(*run.cycles[1]),
            (std::vector<std::string>{"aten::mm", "ProfilerStep#6", "aten::mm", "ProfilerStep#7"}));
  for (size_t i = 0; i < 2; ++i) {
    const CycleRecord& cycle = *run.cycles[i];
    SCOPED_TRACE(cycle.name);
    EXPECT_TRUE(cycle.committed);
    EXPECT_EQ(cycle.recorded.begins, 1);
    EXPECT_EQ(cycle.recorded.finishes, 1);
    EXPECT_EQ(cycle.recorded.threads.size(), 1u);
    EXPECT_EQ(cycle.recorded.session.window_start_unix_ns, i == 0 ? 201u : 601u);  // its first range's start
    EXPECT_EQ(cycle.recorded.summary.window_end_unix_ns, i == 0 ? 310u : 710u);  // its last step's end
  }
  EXPECT_EQ(run.every_cycle.ops.size(), 8u) << "the table sees the recorded steps only";
}

TEST(ScheduledSink, AStopMidCycleWritesWhatItHasAndPythonSpansBeginWithTheCycle) {
  ScheduledRun run("wait=0,warmup=1,active=3");
  run.run_step(0, 0);
  run.run_step(1, 100);
  run.sink->python_span(7, {.start_ns = 50, .end_ns = 150, .python_id = 1, .name = "train.py(3): step"});
  run.sink->python_span(7, {.start_ns = 20, .end_ns = 60, .python_id = 2, .name = "before the cycle"});
  ASSERT_EQ(run.cycles.size(), 1u);
  const CycleRecord& cycle = *run.cycles.back();
  run.sink->finish({.window_end_unix_ns = 190});
  EXPECT_TRUE(cycle.committed);
  EXPECT_EQ(run.written(), std::vector<std::string>{"cycle0"});
  ASSERT_EQ(cycle.recorded.python_spans.size(), 1u);
  EXPECT_EQ(cycle.recorded.python_spans[0].span.start_ns, 100u) << "cut to where its first step began";
  EXPECT_EQ(cycle.recorded.summary.window_end_unix_ns, 190u);
}

TEST(ScheduledSink, KeepsNothingOfStepsThatDoNotRecord) {
  ScheduledRun run("wait=5,warmup=0,active=1,repeat=1");
  for (uint64_t step = 0; step < 5; ++step) run.run_step(step, 100 * step);
  EXPECT_TRUE(run.cycles.empty());
  EXPECT_TRUE(run.every_cycle.ops.empty());
  run.sink->finish({});
  EXPECT_TRUE(run.sink->written().empty());
}

TEST(ScheduledSink, WithMaxFilesOnlyTheLastCyclesStayOnDisk) {
  ScheduledRun run("wait=1,warmup=0,active=1", 2);
  for (uint64_t step = 0; step < 10; ++step) run.run_step(step, 100 * step);
  ASSERT_EQ(run.cycles.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    SCOPED_TRACE(run.cycles[i]->name);
    EXPECT_TRUE(run.cycles[i]->committed);
    EXPECT_EQ(run.cycles[i]->removed, i < 3) << "removed once two newer cycles were written";
  }
  EXPECT_EQ(run.written(), (std::vector<std::string>{"cycle3", "cycle4"}));
  EXPECT_EQ(run.sink->cycles_removed(), 3u);
  EXPECT_EQ(run.every_cycle.ops.size(), 10u) << "the table still sees every cycle";
}

TEST(ScheduledSink, RangesOfNoNumberedStepAreInNoCycle) {
  ScheduledRun run("wait=0,warmup=0,active=2");
  model::OpSpan partial{.start_ns = 1, .end_ns = 5, .operator_index = 0, .step = model::OpSpan::kNoStep};
  run.sink->op({7, partial, ScheduledRun::kOp});
  EXPECT_TRUE(run.cycles.empty());
  run.run_step(0, 10);
  ASSERT_EQ(run.cycles.size(), 1u);
  EXPECT_EQ(ScheduledRun::names(*run.cycles[0]), (std::vector<std::string>{"aten::mm", "ProfilerStep#0"}));
}

// A window's close cut off part of the next cycle's first step: that cycle holds no whole
// step, and its files are removed rather than written.
TEST(ScheduledSink, ACycleWithoutAWholeStepIsNotKept) {
  ScheduledRun run("wait=1,warmup=0,active=1");
  run.run_step(1, 100);
  model::OpSpan op{.start_ns = 301, .end_ns = 309, .operator_index = 0, .step = 3};
  run.sink->op({7, op, ScheduledRun::kOp});
  model::OpSpan cut{.start_ns = 300, .end_ns = 310, .operator_index = 1, .step = 3};
  run.sink->op({7, cut, {"Partial step (cut off by a window's end)", "", model::RangeKind::kUserAnnotation}});
  run.run_step(5, 500);
  ASSERT_EQ(run.cycles.size(), 3u);
  EXPECT_FALSE(run.cycles[0]->removed);
  EXPECT_TRUE(run.cycles[1]->removed) << "only a cut-off step";
  EXPECT_FALSE(run.cycles[2]->removed);
  EXPECT_EQ(run.written(), (std::vector<std::string>{"cycle0", "cycle2"}));
  EXPECT_EQ(run.sink->cycles_not_kept(), 1u);
  EXPECT_EQ(run.sink->cycles_removed(), 0u);
}

// --max-overhead: a window opened after a cycle's first step began holds only the rest of that
// cycle; such a cycle is not kept, but the one the stop cuts is.
TEST(ScheduledSink, WithWholeCyclesOnlyACycleMissingAStepIsNotKeptUnlessTheStopCutIt) {
  ScheduledRun run("wait=1,warmup=0,active=2", 0, /*whole_cycles_only=*/true);
  run.run_step(2, 200);  // cycle 0's second step only (step 1 was partial)
  run.run_step(4, 400);  // cycle 1, whole
  run.run_step(5, 500);
  run.run_step(7, 700);  // cycle 2's first step, then the stop
  run.sink->finish({.window_end_unix_ns = 800});
  ASSERT_EQ(run.cycles.size(), 3u);
  EXPECT_TRUE(run.cycles[0]->removed) << "missing its first step";
  EXPECT_FALSE(run.cycles[1]->removed);
  EXPECT_FALSE(run.cycles[2]->removed) << "cut by the stop: written with what it has";
  EXPECT_EQ(run.written(), (std::vector<std::string>{"cycle1", "cycle2"}));
  EXPECT_EQ(run.sink->cycles_not_kept(), 1u);
}

// ---- where windows of ops go (--max-overhead with --schedule) ---------------------------------

// A window closes when neither step that may be running records, where the schedule has such
// moments.
TEST(StepSchedule, TellsWhenNoRecordedStepRuns) {
  std::string error;
  const StepSchedule schedule = *StepSchedule::parse("wait=2,warmup=1,active=2", &error);  // cycles of 5
  std::vector<uint64_t> quiet;
  for (uint64_t begun = 0; begun < 10; ++begun)
    if (schedule.between_recorded_steps(begun)) quiet.push_back(begun);
  EXPECT_EQ(quiet, (std::vector<uint64_t>{0, 1, 2, 6, 7}));  // steps 3-4 and 8-9 record
  const StepSchedule back_to_back = *StepSchedule::parse("wait=0,warmup=1,active=2", &error);
  for (uint64_t begun = 0; begun < 6; ++begun) EXPECT_TRUE(back_to_back.between_recorded_steps(begun)) << begun;
}

TEST(StepSchedule, NamesEachCyclesRecordedStepsAndTheNextCycleNotBegun) {
  std::string error;
  const StepSchedule schedule = *StepSchedule::parse("wait=2,warmup=1,active=3,repeat=2,skip_first=4", &error);
  EXPECT_EQ(schedule.first_recorded_step(0), 7u);
  EXPECT_EQ(schedule.last_recorded_step(0), 9u);
  EXPECT_EQ(schedule.first_recorded_step(1), 13u);
  EXPECT_EQ(schedule.last_recorded_step(1), 15u);
  for (uint64_t step = 0; step < 20; ++step) {
    SCOPED_TRACE(step);
    const std::optional<uint64_t> next = schedule.next_cycle_after(step);
    const std::optional<uint64_t> expected = step < 7 ? 0 : step < 13 ? std::optional<uint64_t>(1) : std::nullopt;
    EXPECT_EQ(next, expected);
    // Agrees with the schedule: the cycle's first recorded step is the first one after `step`
    // that records after one that does not.
    if (next) {
      uint64_t first = step + 1;
      while (!schedule.records(first) || schedule.records(first - 1)) ++first;
      EXPECT_EQ(schedule.first_recorded_step(*next), first);
    }
  }
}

}  // namespace
}  // namespace tprof
