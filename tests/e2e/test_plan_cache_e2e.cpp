// End to end: a second tprof attaching to the same torch build reads libtorch_cpu's plan back
// from the plan cache instead of planning it, says so on its `attached` line, and records the
// same ops as the first.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::fail_harness;

constexpr auto kStartTimeout = 180s;
constexpr auto kRunTimeout = 180s;

// One `tprof attach` of two seconds with its plan cache in `cache`: its `attached` line.
std::string attach_once(pid_t pid, const fs::path& cache, const fs::path& trace) {
  ChildProcess tprof({.argv = {"env", "TPROF_PLAN_CACHE_DIR=" + cache.string(), testing::tprof_binary(), "attach",
                               std::to_string(pid), "--duration", "2", "-o", trace.string(), "--no-et"},
                      .pipe_stderr = true});
  const auto attached = tprof.stderr_lines().read_line_containing("attached to", kStartTimeout);
  if (!attached) fail_harness("tprof never attached:\n" + tprof.stderr_lines().transcript());
  tprof.stderr_lines().read_to_end(kRunTimeout);
  const auto status = tprof.wait_for_exit(kRunTimeout);
  if (!status || !status->succeeded())
    fail_harness("tprof failed (" + (status ? status->describe() : "still running") + "):\n" +
                 tprof.stderr_lines().transcript());
  return *attached;
}

std::set<std::string> op_names(const fs::path& trace) {
  std::set<std::string> names;
  for (const auto& [name, count] : complete_event_name_counts(load_trace(trace), "cpu_op")) names.insert(name);
  return names;
}

TEST(PlanCache, TheSecondAttachReadsThePlanFromTheCacheAndRecordsTheSameOps) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; the plan cache is NOT tested ***";
  ScratchDirectory scratch;
  const std::unique_ptr<ChildProcess> training = start_endless_training(scratch.path());
  const fs::path cache = scratch.path() / "plans";

  const std::string first = attach_once(training->pid(), cache, scratch.path() / "first.pt.trace.json");
  EXPECT_NE(first.find(" ms (plan "), std::string::npos) << first;
  EXPECT_EQ(first.find("from cache"), std::string::npos) << "nothing was cached yet: " << first;
  ASSERT_FALSE(fs::is_empty(cache)) << "the first attach keeps its plan";

  const std::string second = attach_once(training->pid(), cache, scratch.path() / "second.pt.trace.json");
  EXPECT_NE(second.find(" from cache, load "), std::string::npos) << second;

  const std::set<std::string> first_ops = op_names(scratch.path() / "first.pt.trace.json");
  EXPECT_GT(first_ops.size(), 20u);
  EXPECT_EQ(first_ops, op_names(scratch.path() / "second.pt.trace.json"));
}

}  // namespace
}  // namespace tprof::test
