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
std::string attach(pid_t pid, const fs::path& trace, std::vector<std::string> options) {
  std::vector<std::string> argv = {testing::tprof_binary(), "attach", std::to_string(pid), "-o", trace.string(),
                                   "--no-et"};
  argv.insert(argv.end(), options.begin(), options.end());
  ChildProcess tprof({.argv = argv, .pipe_stderr = true});
  tprof.stderr_lines().read_to_end(kRunTimeout);
  const auto status = tprof.wait_for_exit(kRunTimeout);
  if (!status || !status->succeeded())
    fail_harness("tprof failed (" + (status ? status->describe() : "still running") + "):\n" +
                 tprof.stderr_lines().transcript());
  return tprof.stderr_lines().transcript();
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

TEST(OverheadBudget, EveryProfilerStepIsAWholeStepAndNoOpIsWrittenBetweenWindows) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; --max-overhead is NOT tested ***";
  ScratchDirectory scratch;
  const std::unique_ptr<ChildProcess> training = start_endless_training(scratch.path());

  // A step of the loop, as a plain recording writes it.
  attach(training->pid(), scratch.path() / "plain.pt.trace.json", {"--duration", "2"});
  std::map<std::map<std::string, int>, int> plain_steps;
  for (const Step& step : steps_of(load_trace(scratch.path() / "plain.pt.trace.json")))
    if (step.name.starts_with("ProfilerStep#")) ++plain_steps[step.ranges];
  ASSERT_FALSE(plain_steps.empty());
  const auto usual = std::max_element(plain_steps.begin(), plain_steps.end(),
                                      [](const auto& a, const auto& b) { return a.second < b.second; });
  ASSERT_GT(usual->first.at("aten::convolution"), 0);

  // At 20%, the first window (its cost guessed at 300 ms) opens after 1.8 s of the loop's CPU.
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

  uint64_t last_number = 0;
  for (const Step* step : exact) {
    SCOPED_TRACE(step->name);
    EXPECT_EQ(step->ranges, usual->first) << "a whole step, as a plain recording writes one";
    const uint64_t number = std::stoull(step->name.substr(std::string("ProfilerStep#").size()));
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
}

}  // namespace
}  // namespace tprof::test
