// Many threads: an inference server's or data pipeline's pool of Python threads, all running
// ops at once (tests/workloads/many_threads.py: 500 threads, each in a worker_<i> function of
// its own). tprof attaches to a fresh target ten times in a row; in every run at least 99% of
// the recorded ops must carry their own thread's Python stack, and tprof must account for any
// that do not.
#include <gtest/gtest.h>

#include <csignal>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int kThreads = 500;
constexpr int kIterations = 20;
constexpr int kRuns = 10;
constexpr double kMinimumWithOwnStack = 0.99;

struct RunResult {
  size_t ops = 0;
  size_t with_own_stack = 0;
  uint64_t ops_without_python_stack = 0;  // as tprof_summary counts them
  uint64_t dropped = 0;
};

RunResult record_once(const fs::path& scratch, int run) {
  ChildProcess workload({.argv = {"/usr/bin/python3", workload_script("many_threads.py").string(), "--threads",
                                  std::to_string(kThreads), "--iterations", std::to_string(kIterations)},
                         .pipe_stdin = true,
                         .pipe_stdout = true});
  const auto ready = workload.stdout_lines().read_line_containing("READY", 180s);
  if (!ready) testing::fail_harness("many_threads.py never printed READY");
  const fs::path trace_path = scratch / ("run" + std::to_string(run) + ".pt.trace.json");
  ChildProcess tprof({.argv = {testing::tprof_binary(), "attach", ready->substr(6), "-o", trace_path.string(), "--no-et"},
                      .pipe_stderr = true});
  if (!tprof.stderr_lines().read_line_containing("attached", 180s))
    testing::fail_harness("tprof never attached:\n" + tprof.stderr_lines().transcript());
  workload.write_stdin("go\n");
  const auto tids_line = workload.stdout_lines().read_line_containing("TIDS", 600s);
  if (!tids_line || !workload.stdout_lines().read_line_containing("DONE", 60s))
    testing::fail_harness("many_threads.py never finished:\n" + workload.stdout_lines().transcript());
  tprof.send_signal(SIGINT);
  tprof.stderr_lines().read_to_end(600s);
  const auto status = tprof.wait_for_exit(60s);
  EXPECT_EQ(unclean_exit_of(workload, 60s), "");
  if (!status || !status->succeeded()) testing::fail_harness("tprof failed:\n" + tprof.stderr_lines().transcript());

  std::map<int64_t, std::string> own_function;  // tid -> "worker_<i>"
  std::istringstream tids(tids_line->substr(5));
  int64_t tid = 0;
  for (int index = 0; tids >> tid; ++index) own_function[tid] = "worker_" + std::to_string(index);
  const auto trace = load_trace(trace_path);
  RunResult result;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("cat", "") != "cpu_op" || !event.value("name", "").starts_with("aten::")) continue;
    const auto own = own_function.find(event.at("tid").get<int64_t>());
    if (own == own_function.end()) continue;  // the main thread's own ops
    ++result.ops;
    const std::string stack = event.at("args").value("Call stack", "");
    if (stack.find(": " + own->second + ";") != std::string::npos) ++result.with_own_stack;
  }
  result.ops_without_python_stack = trace.at("tprof_summary").at("ops_without_python_stack").get<uint64_t>();
  result.dropped = trace.at("tprof_summary").at("dropped_records").get<uint64_t>();
  return result;
}

TEST(ManyThreads, EveryAttachGivesNearlyEveryOpItsThreadsPythonStack) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; many-thread stacks are NOT tested ***";
  ScratchDirectory scratch;
  for (int run = 0; run < kRuns; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const RunResult result = record_once(scratch.path(), run);
    std::cout << "run " << run << ": " << result.with_own_stack << " of " << result.ops
              << " worker ops with their own thread's stack; ops_without_python_stack "
              << result.ops_without_python_stack << ", dropped records " << result.dropped << '\n';
    ASSERT_GT(result.ops, 0u);
    EXPECT_GE(static_cast<double>(result.with_own_stack), kMinimumWithOwnStack * static_cast<double>(result.ops));
    // What lacks a stack is counted, never silent.
    EXPECT_GE(result.ops_without_python_stack, result.ops - result.with_own_stack);
  }
}

}  // namespace
}  // namespace tprof::test
