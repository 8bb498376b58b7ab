// `tprof doctor [PID]` on real processes: a parked torch training loop (everything ok), a
// process that is not Python (attach would refuse it: exit 1, with the reason and a fix), and a
// pid nobody has (exit 1).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"

namespace tprof::test {
namespace {

using namespace std::chrono_literals;

struct DoctorOutput {
  int exit_code = -1;
  std::vector<std::string> lines;
  bool has_line(const std::string& start, const std::string& containing = "") const {
    for (const std::string& line : lines)
      if (line.starts_with(start) && line.find(containing) != std::string::npos) return true;
    return false;
  }
  std::string text() const {
    std::string all;
    for (const std::string& line : lines) all += line + "\n";
    return all;
  }
};

DoctorOutput run_doctor(const std::vector<std::string>& arguments) {
  std::vector<std::string> argv = {testing::tprof_binary(), "doctor"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  const CommandResult result = run_command(argv, 120s);
  EXPECT_TRUE(result.status.has_value()) << "tprof doctor did not finish";
  return {result.status && result.status->exited_normally ? result.status->code : -1, result.stdout_lines};
}

class DoctorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::has_tracing_capabilities())
      GTEST_SKIP() << "\n*** SKIPPED LOUDLY: tprof doctor's verdicts assume root; NOT tested ***";
  }
};

TEST_F(DoctorTest, ATorchTrainingLoopPassesEveryCheck) {
  ScratchDirectory scratch;
  ChildProcess workload({.argv = workload_command(host_workload(scratch.path()), {"--steps", "1", "--trigger", "stdin"}),
                         .pipe_stdin = true,
                         .pipe_stdout = true});
  const auto ready = workload.stdout_lines().read_line_containing("READY", 180s);
  ASSERT_TRUE(ready) << workload.stdout_lines().transcript();
  const std::string pid = ready->substr(ready->find(' ') + 1);

  const DoctorOutput doctor = run_doctor({pid});
  EXPECT_EQ(unclean_exit_of(workload, 60s), "");
  EXPECT_EQ(doctor.exit_code, 0) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  ok    kernel", "uprobe_multi")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  ok    privileges")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("process " + pid + ":")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  ok    Python", "CPython 3.11")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  ok    torch", "torch 1.13")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  ok    shapes", "calibrates")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  ok    namespaces", "shares tprof's PID namespace")) << doctor.text();
  EXPECT_EQ(doctor.lines.back(), "tprof attach " + pid + " would work");
}

TEST_F(DoctorTest, AProcessWithNeitherTorchNorPythonFailsWithAFix) {
  ChildProcess sleeper({.argv = {"sleep", "120"}});
  const std::string pid = std::to_string(sleeper.pid());
  // Until it has exec'd, the child is a copy of this test.
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  std::error_code error;
  while (std::filesystem::read_symlink("/proc/" + pid + "/exe", error).filename() != "sleep" &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  const DoctorOutput doctor = run_doctor({pid});
  sleeper.send_signal(SIGKILL);
  sleeper.wait_for_exit(10s);
  EXPECT_EQ(doctor.exit_code, 1) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  warn  Python", "no CPython interpreter")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  warn  torch", "no libtorch_cpu")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  FAIL  target", "neither torch ops nor Python stacks")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("                    fix: attach to a PyTorch or CPython process")) << doctor.text();
  EXPECT_EQ(doctor.lines.back(), "tprof attach " + pid + " would fail: see FAIL above");
}

TEST_F(DoctorTest, AMissingPidFails) {
  // A pid that was just in use and is now free: a child that exited and was reaped.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  const DoctorOutput doctor = run_doctor({std::to_string(child)});
  EXPECT_EQ(doctor.exit_code, 1) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  FAIL  process", "no such process: " + std::to_string(child))) << doctor.text();
}

TEST_F(DoctorTest, WithoutAPidItChecksTheMachineOnly) {
  const DoctorOutput doctor = run_doctor({});
  EXPECT_EQ(doctor.exit_code, 0) << doctor.text();
  EXPECT_TRUE(doctor.has_line("this machine:")) << doctor.text();
  EXPECT_TRUE(doctor.has_line("  ok    BTF")) << doctor.text();
  EXPECT_FALSE(doctor.has_line("process ")) << doctor.text();
  EXPECT_EQ(doctor.lines.back(), "tprof attach would work");
}

}  // namespace
}  // namespace tprof::test
