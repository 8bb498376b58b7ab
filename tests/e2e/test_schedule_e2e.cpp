// End to end: --step-function, and --schedule on the training loop (torch 1.13, 12 steps). With
// wait=1,warmup=1,active=2,repeat=2 tprof writes exactly two traces, named as
// tensorboard_trace_handler names them, holding steps 2-3 and 6-7 (where torch.profiler.schedule
// records, as test_step_schedule checks against torch's own function), each with its ET, and
// detaches by itself once the second is written.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr auto kStartTimeout = 180s;
constexpr auto kRunTimeout = 600s;

// The ProfilerStep numbers a trace holds, and how many Optimizer.step ranges.
struct StepContents {
  std::set<int> steps;
  size_t optimizer_steps = 0;
};

StepContents step_contents(const TraceJson& trace) {
  StepContents contents;
  for (const auto& event : trace.at("traceEvents")) {
    const std::string name = event.value("name", "");
    if (event.value("cat", "") != "user_annotation") continue;
    if (name.starts_with("ProfilerStep#")) contents.steps.insert(std::stoi(name.substr(13)));
    if (name.starts_with("Optimizer.step#")) ++contents.optimizer_steps;
  }
  return contents;
}

// In whole ns: sums of the parsed decimals (doubles, even when read into long double) could put
// two equal ends an ulp apart.
struct Slice {
  int64_t start = 0;
  int64_t end = 0;
};

// The complete events of `trace` whose category and name `keep` accepts.
std::vector<Slice> slices_of(const TraceJson& trace,
                             const std::function<bool(const std::string& category, const std::string& name)>& keep) {
  std::vector<Slice> slices;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("ph", "") != "X" || !keep(event.value("cat", ""), event.at("name").get<std::string>())) continue;
    const int64_t start = std::llround(event.at("ts").get<double>() * 1e3);
    slices.push_back({start, start + std::llround(event.at("dur").get<double>() * 1e3)});
  }
  return slices;
}

std::vector<Slice> named(const TraceJson& trace, std::string_view prefix) {
  return slices_of(trace, [&](const std::string&, const std::string& name) { return name.starts_with(prefix); });
}

size_t count_inside(const std::vector<Slice>& slices, const Slice& outer) {
  return std::count_if(slices.begin(), slices.end(),
                       [&](const Slice& inner) { return inner.start >= outer.start && inner.end <= outer.end; });
}

TEST(Schedule, WritesOneTracePerCycleOfTheStepsTorchsScheduleRecordsThenDetaches) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; --schedule is NOT tested ***";
  ScratchDirectory scratch;
  const fs::path traces = scratch.path() / "traces";
  fs::create_directory(traces);
  const WorkloadEnvironment environment = host_workload(scratch.path());
  ChildProcess workload({.argv = workload_command(environment, {"--steps", "12", "--trigger", "stdin"}),
                         .pipe_stdin = true,
                         .pipe_stdout = true});
  const auto ready = workload.stdout_lines().read_line_containing("READY", kStartTimeout);
  ASSERT_TRUE(ready.has_value()) << workload.stdout_lines().transcript();
  const std::string pid = ready->substr(ready->find(' ') + 1);

  ChildProcess tprof({.argv = {testing::tprof_binary(), "attach", pid, "--schedule", "wait=1,warmup=1,active=2,repeat=2",
                               "--output-dir", traces.string()},
                      .pipe_stderr = true});
  ASSERT_TRUE(tprof.stderr_lines().read_line_containing("attached", kStartTimeout)) << tprof.stderr_lines().transcript();
  workload.write_stdin("go\n");
  ASSERT_TRUE(workload.stdout_lines().read_line_containing("DONE", kRunTimeout)) << workload.stdout_lines().transcript();
  // No signal: the schedule's end stops it.
  tprof.stderr_lines().read_to_end(kRunTimeout);
  const auto status = tprof.wait_for_exit(kRunTimeout);
  const std::string transcript = tprof.stderr_lines().transcript();
  EXPECT_EQ(unclean_exit_of(workload, kRunTimeout), "");
  std::cout << transcript;
  ASSERT_TRUE(status.has_value() && status->succeeded()) << transcript;
  EXPECT_NE(transcript.find("stopped: schedule complete"), std::string::npos);

  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(traces))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());  // the names carry the time each cycle began
  ASSERT_EQ(files.size(), 2u) << "one trace per cycle";
  const std::regex handler_name(R"([^/]+_)" + pid + R"(\.\d+\.pt\.trace\.json)");
  const std::vector<std::set<int>> expected_steps = {{2, 3}, {6, 7}};
  for (size_t cycle = 0; cycle < files.size(); ++cycle) {
    SCOPED_TRACE(files[cycle].string());
    EXPECT_TRUE(std::regex_match(files[cycle].filename().string(), handler_name));
    EXPECT_EQ(validate_trace_file(files[cycle]), std::vector<std::string>{});
    const StepContents contents = step_contents(load_trace(files[cycle]));
    EXPECT_EQ(contents.steps, expected_steps[cycle]);
    EXPECT_EQ(contents.optimizer_steps, 2u) << "each step holds its optimizer step";
    std::string stem = files[cycle].filename().string();
    stem.resize(stem.size() - std::string(".pt.trace.json").size());
    EXPECT_TRUE(fs::exists(traces / "execution_trace" / (stem + ".et.json")));
  }
}

// Without options: 12 iterations of the training loop give exactly 12 steps, each enclosing its
// iteration's Optimizer.step. The workload waits on stdin before its loop, and where tprof first
// sees its thread decides the first step (docs/steps-and-summaries.md):
//  - most often at its first op, inside the loop: the first iteration is "Partial step (in
//    progress when first seen)", as tprof cannot tell it from one it came into, and the other 11
//    are ProfilerStep#1 to #11;
//  - now and then the stack sampler catches it between its wakeup and its loop (once in CI;
//    3 runs in 3 with --sample-hz 20000): the first iteration is ProfilerStep#0, and all 12 are
//    whole.
TEST(Steps, TwelveIterationsGiveTwelveStepsEachHoldingItsOptimizerStep) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; steps are NOT tested ***";
  ScratchDirectory scratch;
  const fs::path trace_path = scratch.path() / "twelve.pt.trace.json";
  record_workload_with_tprof(host_workload(scratch.path()), {"--steps", "12"}, trace_path, {"--no-et"});
  const TraceJson trace = load_trace(trace_path);
  std::vector<Slice> steps = named(trace, "ProfilerStep#");
  const std::vector<Slice> partial = named(trace, "Partial step (in progress when first seen)");
  const std::vector<Slice> optimizer_steps = named(trace, "Optimizer.step#");
  ASSERT_EQ(named(trace, "Partial step").size(), partial.size()) << "no other partial step";
  ASSERT_LE(partial.size(), 1u);
  std::set<int> expected_numbers = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  if (partial.empty()) {
    expected_numbers.insert(0);
  } else {
    EXPECT_TRUE(std::all_of(steps.begin(), steps.end(),
                            [&](const Slice& step) { return step.start >= partial.front().end; }))
        << "the partial step is the first";
    steps.push_back(partial.front());
  }
  ASSERT_EQ(steps.size(), 12u);
  ASSERT_EQ(optimizer_steps.size(), 12u);
  for (const Slice& step : steps) EXPECT_EQ(count_inside(optimizer_steps, step), 1u);
  EXPECT_EQ(step_contents(trace).steps, expected_numbers);
}

// Each call of the function --step-function names is one step: 5 training_step calls give 5
// steps, each enclosing one call and its optimizer step. A function never called leaves one
// step over the window.
TEST(StepFunction, EachCallOfTheNamedFunctionIsOneStep) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; --step-function is NOT tested ***";
  ScratchDirectory scratch;
  using Case = std::pair<std::string, size_t>;  // the function named, and the steps it gives
  for (const auto& [function, expected_steps] : {Case{"training_step", 5},
                                                 Case{"train_loop:make_training_step.<locals>.training_step", 5},
                                                 Case{"no_such_function", 1}}) {
    SCOPED_TRACE(function);
    const fs::path trace_path = scratch.path() / ("steps_" + std::to_string(expected_steps) + "_" +
                                                  std::to_string(function.size()) + ".pt.trace.json");
    record_workload_with_tprof(host_workload(scratch.path()), {"--steps", "5"}, trace_path,
                               {"--step-function", function, "--no-et"});
    EXPECT_EQ(validate_trace_file(trace_path), std::vector<std::string>{});
    const TraceJson trace = load_trace(trace_path);
    const std::vector<Slice> steps = named(trace, "ProfilerStep#"), optimizer_steps = named(trace, "Optimizer.step#");
    const std::vector<Slice> calls = slices_of(trace, [](const std::string& category, const std::string& name) {
      return category == "python_function" && name.ends_with("): training_step");
    });
    ASSERT_EQ(steps.size(), expected_steps);
    ASSERT_EQ(calls.size(), 5u);
    if (expected_steps != 5) continue;
    for (const Slice& step : steps) {
      EXPECT_EQ(count_inside(calls, step), 1u);
      EXPECT_EQ(count_inside(optimizer_steps, step), 1u);
    }
  }
}

// tprof attached inside a running training loop, stopped by --duration: the iteration it came
// into and the one it stopped in are "Partial step" annotations, and every ProfilerStep is a
// whole iteration holding its one Optimizer.step (issue 24: step 0 of such a recording began
// up to 101 ms before its first op, and TensorBoard's average step was 4 times torch's).
TEST(Steps, AttachedInsideARunningLoopEveryProfilerStepIsAWholeIteration) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; partial steps are NOT tested ***";
  ScratchDirectory scratch;
  const fs::path trace_path = scratch.path() / "running.pt.trace.json";
  ChildProcess workload({.argv = workload_command(host_workload(scratch.path()),
                                                  {"--steps", "1000000", "--trigger", "none", "--warmup", "0"}),
                         .pipe_stdout = true});
  ASSERT_TRUE(workload.stdout_lines().read_line_containing("READY", kStartTimeout)) << workload.stdout_lines().transcript();
  std::this_thread::sleep_for(300ms);  // well inside the loop
  ChildProcess tprof({.argv = {testing::tprof_binary(), "attach", std::to_string(workload.pid()), "--duration", "3",
                               "-o", trace_path.string(), "--no-et"},
                      .pipe_stderr = true});
  tprof.stderr_lines().read_to_end(kRunTimeout);
  const auto status = tprof.wait_for_exit(kRunTimeout);
  const std::string transcript = tprof.stderr_lines().transcript();
  workload.send_signal(SIGKILL);
  ASSERT_TRUE(status.has_value() && status->succeeded()) << transcript;
  EXPECT_EQ(validate_trace_file(trace_path), std::vector<std::string>{});

  const TraceJson trace = load_trace(trace_path);
  const std::vector<Slice> steps = named(trace, "ProfilerStep#"), optimizer_steps = named(trace, "Optimizer.step#");
  const std::vector<Slice> before = named(trace, "Partial step (in progress when first seen)");
  const std::vector<Slice> after = named(trace, "Partial step (cut off by the stop)");
  ASSERT_EQ(before.size(), 1u) << transcript;
  EXPECT_EQ(count_inside(optimizer_steps, before.front()), 1u) << "it ends after the first boundary";
  ASSERT_GE(steps.size(), 2u) << transcript;
  for (const Slice& step : steps) EXPECT_EQ(count_inside(optimizer_steps, step), 1u);
  EXPECT_FALSE(step_contents(trace).steps.contains(0)) << "the first whole step is ProfilerStep#1";
  EXPECT_LE(after.size(), 1u);
  for (const Slice& cut : after) EXPECT_EQ(count_inside(optimizer_steps, cut), 0u);
  EXPECT_NE(transcript.find(" partial)"), std::string::npos) << transcript;
}

TEST(Schedule, RefusesASingleOutputFileAndABadScheduleWithOneLine) {
  for (const std::vector<std::string>& arguments :
       {std::vector<std::string>{"--schedule", "wait=1,warmup=1,active=2", "-o", "x.pt.trace.json"},
        std::vector<std::string>{"--schedule", "wait=1,active=2"}}) {
    SCOPED_TRACE(arguments.back());
    std::vector<std::string> argv = {testing::tprof_binary(), "attach", std::to_string(::getpid())};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    ChildProcess tprof({.argv = argv, .pipe_stderr = true});
    tprof.stderr_lines().read_to_end(30s);
    const auto status = tprof.wait_for_exit(30s);
    ASSERT_TRUE(status.has_value());
    EXPECT_TRUE(status->exited_normally) << status->describe();
    EXPECT_NE(status->code, 0);
    const std::string text = tprof.stderr_lines().transcript();
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
    EXPECT_TRUE(text.starts_with("tprof: error: --schedule")) << text;
  }
}

}  // namespace
}  // namespace tprof::test
