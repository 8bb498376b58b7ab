// `tprof record -- CMD` starts a command with the CUPTI injection variable set, attaches once it
// has loaded torch, and ends with the command's status; `tprof env` prints that variable.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
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

struct Finished {
  ExitStatus status;
  std::string console;  // stderr
};

Finished run_tprof(const std::vector<std::string>& arguments) {
  std::vector<std::string> argv = {testing::tprof_binary()};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  ChildProcess tprof({.argv = argv, .pipe_stderr = true});
  tprof.stderr_lines().read_to_end(300s);
  const auto status = tprof.wait_for_exit(60s);
  if (!status) testing::fail_harness("tprof did not exit:\n" + tprof.stderr_lines().transcript());
  return {*status, tprof.stderr_lines().transcript()};
}

TEST(Record, TracesTheCommandItStartsAndEndsWithItsStatus) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; tprof record is NOT tested ***";
  ScratchDirectory scratch;
  const fs::path trace = scratch.path() / "run.pt.trace.json";
  // Loads torch, runs ops for a while, and exits 3. 10 s: under ASan (scripts/sanitize.sh) tprof
  // takes over 4 s to plan the probes, and attached after the loop had ended.
  const std::string program =
      "import sys, time, torch\n"
      "x = torch.ones(64, 64)\n"
      "end = time.time() + 10\n"
      "while time.time() < end: x = torch.relu(x @ x * 0.01)\n"
      "sys.exit(3)\n";
  const Finished finished = run_tprof({"record", "-o", trace.string(), "--no-et", "--", "/usr/bin/python3", "-c", program});
  EXPECT_TRUE(finished.status.exited_normally);
  EXPECT_EQ(finished.status.code, 3) << "the command's status:\n" << finished.console;
  ASSERT_TRUE(fs::exists(trace)) << finished.console;
  EXPECT_TRUE(validate_trace_file(trace).empty());
  std::ifstream in(trace);
  const nlohmann::json document = nlohmann::json::parse(in);
  size_t matmuls = 0;
  for (const auto& event : document.at("traceEvents")) matmuls += event.value("name", "") == "aten::mm";
  EXPECT_GT(matmuls, 100u) << finished.console;
  // A CPU-only torch never initializes CUDA, so the library set in its environment never loads.
  EXPECT_NE(document.at("tprof").at("gpu").get<std::string>().find("unavailable"), std::string::npos);
}

// A command that runs but never loads torch: test_record_hold_e2e.cpp.
TEST(Record, ACommandThatCannotRunIsAnError) {
  const Finished missing = run_tprof({"record", "--", "/nonexistent/command"});
  EXPECT_EQ(missing.status.code, 1);
  EXPECT_EQ(missing.console, "tprof: error: cannot run /nonexistent/command: No such file or directory\n");
}

TEST(Env, PrintsTheInjectionVariableNamingTheBuiltLibrary) {
  const auto result = run_command({testing::tprof_binary(), "env"}, 10s);
  ASSERT_TRUE(result.status && result.status->succeeded());
  ASSERT_EQ(result.stdout_lines.size(), 1u);
  const std::string prefix = "export CUDA_INJECTION64_PATH=";
  ASSERT_TRUE(result.stdout_lines[0].starts_with(prefix)) << result.stdout_lines[0];
  const fs::path library = result.stdout_lines[0].substr(prefix.size());
  EXPECT_EQ(library.filename(), "libtprof_cupti.so");
  EXPECT_TRUE(fs::exists(library));
}

}  // namespace
}  // namespace tprof::test
