#include "tests/support/recorded_workload.h"

#include <chrono>
#include <csignal>
#include <deque>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "tests/support/test_environment.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::fail_harness;

// Generous: importing torch and attaching thousands of uprobes take seconds on a loaded CI
// machine, and the reference profilers slow the steps down; none is a performance assertion.
constexpr auto kStartTimeout = 180s;
constexpr auto kRunTimeout = 600s;
constexpr auto kRootBuildTimeout = 900s;
// Parking after DONE takes microseconds; under load, up to a scheduling delay or two.
constexpr auto kParkTimeout = 2000ms;

// Waits, at most `timeout`, until `pid`'s main thread sleeps: after DONE a workload parks in a
// read of stdin, and a recording stopped then ends with it parked there (a blocked stack), not
// still on its way to the read on a loaded machine.
void wait_until_asleep(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(stat, text);
    const size_t name_end = text.rfind(')');  // the state follows the command name in parentheses
    if (name_end != std::string::npos && name_end + 2 < text.size() && text[name_end + 2] == 'S') return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace

std::string suite_name(TorchRoot root) { return root == TorchRoot::kSid ? "sid" : "trixie"; }

fs::path workload_script(const std::string& file_name) {
  return fs::path(testing::source_dir()) / "tests/workloads" / file_name;
}

std::unique_ptr<ChildProcess> start_endless_training(const fs::path& scratch) {
  auto workload = std::make_unique<ChildProcess>(SpawnOptions{
      .argv = workload_command(host_workload(scratch), {"--steps", "1000000", "--trigger", "none"}),
      .pipe_stdout = true});
  if (!workload->stdout_lines().read_line_containing("READY", kStartTimeout))
    fail_harness("the workload never printed READY:\n" + workload->stdout_lines().transcript());
  return workload;
}

std::vector<std::string> workload_command(const WorkloadEnvironment& environment,
                                          const std::vector<std::string>& arguments) {
  std::vector<std::string> command = environment.interpreter;
  command.push_back(environment.script.string());
  command.insert(command.end(), arguments.begin(), arguments.end());
  return command;
}

WorkloadEnvironment in_new_pid_namespace(WorkloadEnvironment environment) {
  // --kill-child: the namespace's processes go when unshare does.
  const std::vector<std::string> unshare = {"unshare", "--pid", "--fork", "--mount", "--mount-proc", "--kill-child"};
  environment.interpreter.insert(environment.interpreter.begin(), unshare.begin(), unshare.end());
  environment.description += " in new PID and mount namespaces";
  return environment;
}

pid_t host_pid_of(pid_t launched_pid, pid_t reported_pid) {
  // Parent links of every process, then the launched process's descendants, breadth first.
  std::map<pid_t, std::vector<pid_t>> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream status(entry.path() / "status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.starts_with("PPid:")) children[std::stoi(line.substr(5))].push_back(std::stoi(name));
    }
  }
  std::deque<pid_t> pending = {launched_pid};
  while (!pending.empty()) {
    const pid_t pid = pending.front();
    pending.pop_front();
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (!line.starts_with("NSpid:")) continue;
      std::istringstream ids(line.substr(6));
      pid_t innermost = 0;
      for (pid_t id = 0; ids >> id;) innermost = id;
      if (innermost == reported_pid) return pid;
    }
    for (const pid_t child : children[pid]) pending.push_back(child);
  }
  return reported_pid;
}

WorkloadEnvironment host_workload(const fs::path& scratch, const fs::path& script) {
  return {.description = "torch 1.13 / Python 3.11 (host)",
          .interpreter = {"/usr/bin/python3"},
          .script = script,
          .scratch_for_target = scratch,
          .scratch_for_us = scratch};
}

std::string describe(TorchRoot root) {
  return root == TorchRoot::kSid ? "torch 2.14 / Python 3.14 (sid chroot)" : "torch 2.6 / Python 3.13 (trixie chroot)";
}

void PrintTo(TorchRoot root, std::ostream* out) { *out << describe(root); }

std::string missing_root_message(TorchRoot root, const std::string& what) {
  return "\n**********\n*** SKIPPED LOUDLY: scripts/make-torch-root.sh " + suite_name(root) +
         " could not provide " + describe(root) + "; " + what + " NOT tested\n**********";
}

std::vector<RootCase> root_cases() {
  std::vector<RootCase> cases;
  for (const TorchRoot root : {TorchRoot::kTrixie, TorchRoot::kSid})
    for (const char* workload : {"train_loop.py", "broad_model.py"}) cases.push_back({root, workload});
  return cases;
}

std::string case_name(const RootCase& root_case) {
  return suite_name(root_case.root) + "_" + root_case.workload.substr(0, root_case.workload.find('.'));
}

void PrintTo(const RootCase& root_case, std::ostream* out) {
  *out << describe(root_case.root) << ", " << root_case.workload;
}

std::unique_ptr<RootWorkload> RootWorkload::make(TorchRoot root, const fs::path& script, RootTools tools) {
  const char* maker = tools == RootTools::kInductor ? "scripts/make-inductor-root.sh" : "scripts/make-torch-root.sh";
  const auto built =
      run_command({"bash", (fs::path(testing::source_dir()) / maker).string(), suite_name(root)}, kRootBuildTimeout);
  if (!built.status || !built.status->succeeded() || built.stdout_lines.empty()) return nullptr;
  return std::unique_ptr<RootWorkload>(new RootWorkload(root, built.stdout_lines.back(), script, tools));
}

RootWorkload::RootWorkload(TorchRoot root, const fs::path& root_path, const fs::path& script, RootTools tools)
    : in_root_(root_path / "tmp") {
  // The target sees the root as "/": the workload and its output live under its /tmp. torch
  // leaves a temporary directory behind when killed; TMPDIR keeps it in the scratch directory.
  // env execs python, so the pid the workload reports is the interpreter's. The workloads share
  // train_loop.py's protocol (and kineto_key_averages.py its model): it goes beside each.
  fs::copy_file(script, in_root_.path() / script.filename());
  const fs::path protocol = workload_script("train_loop.py");
  if (script.filename() != protocol.filename()) fs::copy_file(protocol, in_root_.path() / protocol.filename());
  const fs::path target_dir = "/tmp" / in_root_.path().filename();
  std::vector<std::string> interpreter = {"chroot", root_path.string(), "env", "TMPDIR=" + target_dir.string()};
  if (tools == RootTools::kInductor)
    interpreter.push_back("TORCHINDUCTOR_CACHE_DIR=" + (target_dir / "inductor-cache").string());
  interpreter.push_back("python3");
  environment_ = {.description = describe(root) + (tools == RootTools::kInductor ? " with inductor's toolchain" : ""),
                  .interpreter = interpreter,
                  .script = target_dir / script.filename(),
                  .scratch_for_target = target_dir,
                  .scratch_for_us = in_root_.path()};
}

std::string record_workload_with_tprof(const WorkloadEnvironment& environment,
                                       const std::vector<std::string>& workload_arguments,
                                       const fs::path& trace_path, const std::vector<std::string>& tprof_arguments) {
  std::vector<std::string> arguments = workload_arguments;
  arguments.insert(arguments.end(), {"--trigger", "stdin"});
  ChildProcess workload({.argv = workload_command(environment, arguments), .pipe_stdin = true, .pipe_stdout = true});
  const auto ready = workload.stdout_lines().read_line_containing("READY", kStartTimeout);
  if (!ready) fail_harness("workload never printed READY:\n" + workload.stdout_lines().transcript());
  // The interpreter's own pid: what tprof must attach to even behind chroot or in its own PID
  // namespace.
  const std::string python_pid = std::to_string(
      host_pid_of(workload.pid(), static_cast<pid_t>(std::stol(ready->substr(ready->find(' ') + 1)))));

  std::vector<std::string> tprof_argv = {testing::tprof_binary(), "attach", python_pid, "--output", trace_path};
  tprof_argv.insert(tprof_argv.end(), tprof_arguments.begin(), tprof_arguments.end());
  ChildProcess tprof({.argv = tprof_argv, .pipe_stderr = true});
  if (!tprof.stderr_lines().read_line_containing("attached", kStartTimeout))
    fail_harness("tprof never printed 'attached':\n" + tprof.stderr_lines().transcript());
  workload.write_stdin("go\n");
  if (!workload.stdout_lines().read_line_containing("DONE", kRunTimeout))
    fail_harness("workload never printed DONE:\n" + workload.stdout_lines().transcript());
  wait_until_asleep(static_cast<pid_t>(std::stol(python_pid)), kParkTimeout);
  tprof.send_signal(SIGINT);
  tprof.stderr_lines().read_to_end(kRunTimeout);
  const auto status = tprof.wait_for_exit(kRunTimeout);
  if (!status || !status->succeeded())
    fail_harness("tprof " + (status ? status->describe() : std::string("did not exit")) + ":\n" +
                 tprof.stderr_lines().transcript());
  if (const std::string unclean = unclean_exit_of(workload, kRunTimeout); !unclean.empty())
    fail_harness(environment.description + " workload: " + unclean + " after tprof detached:\n" +
                 workload.stdout_lines().transcript());
  return tprof.stderr_lines().transcript();
}

void run_workload(const WorkloadEnvironment& environment, const std::vector<std::string>& workload_arguments) {
  const auto result = run_command(workload_command(environment, workload_arguments), kRunTimeout);
  if (!result.status || !result.status->succeeded())
    fail_harness(environment.description + " workload " +
                 (result.status ? result.status->describe() : std::string("timed out")));
}

}  // namespace tprof::test
