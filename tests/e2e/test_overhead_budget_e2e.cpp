// End to end: --max-overhead on a training loop that runs on. The per-op probes go in only for
// windows; every ProfilerStep written is a whole step, holding exactly the ranges a step of
// the same loop holds in a plain recording, numbered by the optimizer steps counted between
// windows too; nothing is written of ops between windows.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::fail_harness;

constexpr auto kRunTimeout = 180s;

// `tprof attach PID` with `options` until it stops: its console.
std::string attach(pid_t pid, std::vector<std::string> options) {
  std::vector<std::string> argv = {testing::tprof_binary(), "attach", std::to_string(pid)};
  argv.insert(argv.end(), options.begin(), options.end());
  ChildProcess tprof({.argv = argv, .pipe_stderr = true});
  tprof.stderr_lines().read_to_end(kRunTimeout);
  const auto status = tprof.wait_for_exit(kRunTimeout);
  if (!status || !status->succeeded())
    fail_harness("tprof failed (" + (status ? status->describe() : "still running") + "):\n" +
                 tprof.stderr_lines().transcript());
  return tprof.stderr_lines().transcript();
}

std::string attach(pid_t pid, const fs::path& trace, std::vector<std::string> options) {
  options.insert(options.begin(), {"-o", trace.string(), "--no-et"});
  return attach(pid, std::move(options));
}

struct Step {
  std::string name;
  double start_us, end_us;
  std::map<std::string, int> ranges;  // the ops, annotations and autograd ranges inside it
};

// Every ProfilerStep and partial step of a trace, with what lies inside it.
std::vector<Step> steps_of(const TraceJson& trace) {
  std::vector<Step> steps;
  for (const auto& event : trace.at("traceEvents")) {
    const std::string name = event.value("name", "");
    if (event.value("ph", "") == "X" && (name.starts_with("ProfilerStep#") || name.starts_with("Partial step")))
      steps.push_back({name, event.at("ts").get<double>(), event.at("ts").get<double>() + event.at("dur").get<double>(), {}});
  }
  for (const auto& event : trace.at("traceEvents")) {
    const std::string category = event.value("cat", "");
    const std::string name = event.value("name", "");
    if (event.value("ph", "") != "X" || (category != "cpu_op" && category != "user_annotation") ||
        name.starts_with("ProfilerStep#") || name.starts_with("Partial step"))
      continue;
    const double start = event.at("ts").get<double>(), end = start + event.at("dur").get<double>();
    for (Step& step : steps)
      if (step.start_us <= start && end <= step.end_us) ++step.ranges[name];
  }
  return steps;
}

// What a step of the loop holds (range name -> count) as a plain recording writes it, its
// most common kind.
std::map<std::string, int> usual_step(pid_t training, const fs::path& scratch) {
  attach(training, scratch / "plain.pt.trace.json", {"--duration", "2"});
  std::map<std::map<std::string, int>, int> plain_steps;
  for (const Step& step : steps_of(load_trace(scratch / "plain.pt.trace.json")))
    if (step.name.starts_with("ProfilerStep#")) ++plain_steps[step.ranges];
  fs::remove(scratch / "plain.pt.trace.json");
  if (plain_steps.empty()) fail_harness("a plain recording of the loop held no ProfilerStep");
  const auto usual = std::max_element(plain_steps.begin(), plain_steps.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
  if (!usual->first.contains("aten::convolution")) fail_harness("the loop's usual step runs no convolution");
  return usual->first;
}

uint64_t step_number(const std::string& profiler_step) {
  return std::stoull(profiler_step.substr(std::string("ProfilerStep#").size()));
}

TEST(OverheadBudget, EveryProfilerStepIsAWholeStepAndNoOpIsWrittenBetweenWindows) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; --max-overhead is NOT tested ***";
  ScratchDirectory scratch;
  const std::unique_ptr<ChildProcess> training = start_endless_training(scratch.path());
  const std::map<std::string, int> usual = usual_step(training->pid(), scratch.path());

  // At 20%, the first window (its cost guessed at 100 ms) opens after 0.6 s of the loop's CPU.
  const fs::path trace_path = scratch.path() / "budget.pt.trace.json";
  const std::string console = attach(training->pid(), trace_path, {"--duration", "8", "--max-overhead", "20%"});
  EXPECT_NE(console.find("ops in windows (--max-overhead 20%): "), std::string::npos) << console;
  EXPECT_EQ(validate_trace_file(trace_path), std::vector<std::string>{});
  const TraceJson trace = load_trace(trace_path);
  const TraceJson& windows = trace.at("tprof_summary").at("op_windows");
  const std::vector<Step> steps = steps_of(trace);
  std::vector<const Step*> exact;
  for (const Step& step : steps)
    if (step.name.starts_with("ProfilerStep#")) exact.push_back(&step);
  ASSERT_GE(exact.size(), 1u) << console;
  EXPECT_EQ(windows.at("exact_steps").get<size_t>(), exact.size());
  EXPECT_GE(windows.at("windows").get<uint64_t>(), 1u);
  const auto seen = windows.at("steps_seen").get<uint64_t>();
  EXPECT_GT(seen, exact.size()) << "the steps between windows are counted";
  // Windows probe only the ops the loop has called (a few hundred of torch's ~3,000), yet each
  // step below holds every range a plain recording, which probes all, finds.
  EXPECT_LT(windows.at("most_sites_linked").get<uint64_t>(), windows.at("sites_attached").get<uint64_t>() / 2)
      << windows.dump();

  uint64_t last_number = 0;
  for (const Step* step : exact) {
    SCOPED_TRACE(step->name);
    EXPECT_EQ(step->ranges, usual) << "a whole step, as a plain recording writes one";
    const uint64_t number = step_number(step->name);
    EXPECT_GT(number, last_number) << "numbered by the optimizer steps so far";
    EXPECT_LE(number, seen);
    last_number = number;
  }
  // Windows begin and end with partial steps: an op outside every step ran between windows.
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("cat", "") != "cpu_op") continue;
    const double start = event.at("ts").get<double>();
    EXPECT_TRUE(std::any_of(steps.begin(), steps.end(),
                            [&](const Step& step) { return step.start_us <= start && start <= step.end_us; }))
        << event.at("name").get<std::string>() << " at " << start << " us lies in no window";
  }
  const TraceJson& cost = trace.at("tprof_summary").at("probe_cost");
  EXPECT_GT(cost.at("moving_probes_ns").get<uint64_t>(), 0u) << "putting the probes in and out costs tprof CPU";
  EXPECT_GE(cost.at("interrupt_ns").get<double>(), 0.0) << "calibrated, if too cheap to measure (0)";

  // The loop calls Optimizer.step, so the windows' cost is measured from its CPU per step: the
  // readings split the target's CPU time and steps between inside and outside the windows, and
  // the pauses (the loop never pauses, but the first stretch counts as one).
  ASSERT_TRUE(windows.contains("step_cost")) << windows.dump();
  const TraceJson& step_cost = windows.at("step_cost");
  const auto steps_inside = step_cost.at("steps_inside").get<uint64_t>();
  const auto steps_outside = step_cost.at("steps_outside").get<uint64_t>();
  EXPECT_GE(steps_inside, exact.size()) << "a window's exact steps are inside it";
  EXPECT_LE(steps_inside + steps_outside, seen);
  EXPECT_GT(steps_inside + steps_outside, seen / 2) << "only the first stretch, before the first reading, is a pause";
  const auto cpu_split = step_cost.at("cpu_inside_ns").get<uint64_t>() + step_cost.at("cpu_outside_ns").get<uint64_t>() +
                         step_cost.at("cpu_in_pauses_ns").get<uint64_t>();
  const auto target_cpu = cost.at("target_cpu_ns").get<uint64_t>();
  EXPECT_LE(cpu_split, target_cpu);
  EXPECT_GT(cpu_split, target_cpu * 9 / 10) << "the readings cover the recording";
  EXPECT_GT(step_cost.at("cpu_inside_ns").get<double>() / static_cast<double>(steps_inside),
            step_cost.at("cpu_outside_ns").get<double>() / static_cast<double>(steps_outside))
      << "a step with every op probed costs the target more than one without";
  const double cost_ns = step_cost.at("estimated_rest_ns").get<double>() +
                         std::max(step_cost.at("excess_inside_ns").get<double>(),
                                  step_cost.at("estimated_inside_ns").get<double>());
  EXPECT_NEAR(windows.at("estimated_slowdown").get<double>(), cost_ns / (static_cast<double>(target_cpu) - cost_ns), 1e-3);
}

// --max-overhead with --schedule, repeating until stopped: each window is for one cycle, and
// each cycle's trace holds that cycle's active steps, whole; --max-files keeps only the last
// cycles' traces and Execution Traces on disk.
TEST(OverheadBudget, UnderAScheduleEachCycleIsATraceOfItsWholeStepsAndMaxFilesKeepsTheLast) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; --max-overhead --schedule is NOT tested ***";
  ScratchDirectory scratch;
  const std::unique_ptr<ChildProcess> training = start_endless_training(scratch.path());
  const std::map<std::string, int> usual = usual_step(training->pid(), scratch.path());

  // At 50% a window (tens of ms of tprof's CPU on the test VM) opens for each cycle it can.
  const fs::path traces = scratch.path() / "cycles";
  fs::create_directory(traces);
  const std::string console = attach(training->pid(), {"--duration", "12", "--max-overhead", "50%", "--schedule",
                                                       "wait=2,warmup=2,active=2", "--max-files", "2",
                                                       "--output-dir", traces.string()});
  ASSERT_NE(console.find("older ones removed for --max-files"), std::string::npos)
      << "at least 3 cycles were written in 12 s:\n" << console;
  EXPECT_TRUE(training->is_running()) << "the target runs on";

  std::vector<fs::path> trace_files, execution_traces;
  for (const auto& entry : fs::directory_iterator(traces))
    if (entry.path().string().ends_with(".pt.trace.json")) trace_files.push_back(entry.path());
  for (const auto& entry : fs::directory_iterator(traces / "execution_trace")) execution_traces.push_back(entry.path());
  ASSERT_EQ(trace_files.size(), 2u) << console;
  EXPECT_EQ(execution_traces.size(), 2u) << "each cycle's Execution Trace goes with its trace";
  std::sort(trace_files.begin(), trace_files.end());  // by the unix_ns in their names
  for (const fs::path& path : trace_files) {
    SCOPED_TRACE(path.filename().string());
    EXPECT_EQ(validate_trace_file(path), std::vector<std::string>{});
    const std::string stem = path.filename().string().substr(0, path.filename().string().size() - 14);
    EXPECT_TRUE(fs::exists(traces / "execution_trace" / (stem + ".et.json")));
    const TraceJson trace = load_trace(path);
    EXPECT_GE(trace.at("tprof_summary").at("op_windows").at("windows").get<uint64_t>(), 1u);
    const std::vector<Step> steps = steps_of(trace);
    std::string names;
    for (const Step& step : steps) names += step.name + " ";
    SCOPED_TRACE(names);
    // The stop may cut the newest cycle short: written with what it has, as torch writes its
    // recording at exit (a cut step is a partial one).
    const bool newest = path == trace_files.back();
    if (!newest) {
      ASSERT_EQ(steps.size(), 2u) << "the cycle's 2 active steps, nothing else";
    }
    ASSERT_FALSE(steps.empty());
    std::optional<uint64_t> first;
    for (const Step& step : steps) {
      if (newest && step.name.starts_with("Partial step")) continue;
      const uint64_t number = step_number(step.name);
      if (!first) first = number;
      EXPECT_EQ(*first % 6, 4u) << step.name << ": wait=2,warmup=2 come first in each cycle of 6";
      EXPECT_LE(number - *first, 1u) << step.name << " in the cycle of ProfilerStep#" << *first;
      EXPECT_EQ(step.ranges, usual) << step.name << " is a whole step";
    }
    if (!newest) {
      EXPECT_EQ(steps[1].name, "ProfilerStep#" + std::to_string(*first + 1));
    }
  }
}

}  // namespace
}  // namespace tprof::test
