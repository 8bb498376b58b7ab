// Runs the repo's training loop (tests/workloads/train_loop.py) on a real torch, either under
// tprof or under torch's own profilers, for the end-to-end tests that hold one against the other.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <sys/types.h>
#include <string>
#include <vector>

#include "tests/support/process_harness.h"

namespace tprof::test {

// One Python/torch installation and where the workload can leave files for the test.
struct WorkloadEnvironment {
  std::string description;               // "torch 1.13 / Python 3.11 (host)"
  std::vector<std::string> interpreter;  // command prefix that runs python3
  std::filesystem::path script;          // train_loop.py as that interpreter sees it
  std::filesystem::path scratch_for_target;  // a directory the target may write, as it sees it
  std::filesystem::path scratch_for_us;      // the same directory as the test sees it
};

// tests/workloads/<file_name> in the source tree.
std::filesystem::path workload_script(const std::string& file_name);

// The command that runs the environment's script with `arguments` in `environment`.
std::vector<std::string> workload_command(const WorkloadEnvironment& environment,
                                          const std::vector<std::string>& arguments);

// Debian's torch 1.13 on /usr/bin/python3 running `script` (train_loop.py by default); files go
// to `scratch`.
WorkloadEnvironment host_workload(const std::filesystem::path& scratch,
                                  const std::filesystem::path& script = workload_script("train_loop.py"));

// The host training loop (train_loop.py), stepping until it is killed, once it has printed
// READY; its files go to `scratch`.
std::unique_ptr<ChildProcess> start_endless_training(const std::filesystem::path& scratch);

// The Debian roots scripts/make-torch-root.sh builds: a torch and a Python the host lacks.
enum class TorchRoot {
  kTrixie,  // torch 2.6 on Python 3.13
  kSid,     // torch 2.14 on Python 3.14, built by GCC 16
};

// The Debian suite: "trixie" or "sid" (make-torch-root.sh's argument, test name suffixes).
std::string suite_name(TorchRoot root);

// "torch 2.6 / Python 3.13 (trixie chroot)": for descriptions and skip messages.
std::string describe(TorchRoot root);

// gtest prints a TEST_P parameter through this.
void PrintTo(TorchRoot root, std::ostream* out);

// The loud skip message of a test that needs `root` and could not have it; `what` is what goes
// untested.
std::string missing_root_message(TorchRoot root, const std::string& what);

// One workload of tests/workloads on one root's torch: the training loop, or the broad model
// (attention, LSTM, foreach AdamW, clipping, autocast, channels_last, complex/int8/half/bool,
// a 9-dim tensor, views, None arguments).
struct RootCase {
  TorchRoot root;
  std::string workload;  // "train_loop.py", "broad_model.py"
};

// Both workloads on both roots, for INSTANTIATE_TEST_SUITE_P.
std::vector<RootCase> root_cases();
// "sid_broad_model": a test name suffix.
std::string case_name(const RootCase& root_case);
void PrintTo(const RootCase& root_case, std::ostream* out);

// The root's torch running a copy of `script` (and beside it of train_loop.py, whose protocol
// the other workloads import), with a scratch directory inside the root
// (scripts/make-torch-root.sh builds the root or reuses it); nullptr when the root cannot be
// had.
// With RootTools::kInductor, the root is the one scripts/make-inductor-root.sh makes (inductor's
// C++ toolchain added in an overlay), and inductor's cache is a directory of the scratch one.
enum class RootTools { kTorch, kInductor };

class RootWorkload {
 public:
  static std::unique_ptr<RootWorkload> make(TorchRoot root,
                                            const std::filesystem::path& script = workload_script("train_loop.py"),
                                            RootTools tools = RootTools::kTorch);
  const WorkloadEnvironment& environment() const { return environment_; }

 private:
  RootWorkload(TorchRoot root, const std::filesystem::path& root_path, const std::filesystem::path& script,
               RootTools tools);
  ScratchDirectory in_root_;
  WorkloadEnvironment environment_;
};

// `environment` run in new PID and mount namespaces, with a /proc of its own (`unshare --pid
// --fork --mount --mount-proc`): what a container runtime does underneath. The workload then
// reports a pid of that namespace; host_pid_of finds the one tprof attaches to from outside.
WorkloadEnvironment in_new_pid_namespace(WorkloadEnvironment environment);

// The pid, as this process's /proc numbers it, of the process that knows itself as
// `reported_pid` and is `launched_pid` or one of its descendants (a wrapper such as unshare
// forks the workload). `reported_pid` itself when none is found.
pid_t host_pid_of(pid_t launched_pid, pid_t reported_pid);

// Runs the workload parked at READY with `workload_arguments`, attaches
// `tprof attach PID --output TRACE tprof_arguments...`, releases the steps, stops tprof with
// SIGINT once they are done and lets the workload exit. Returns tprof's stderr; a harness
// failure (no READY, tprof failing) ends the test.
std::string record_workload_with_tprof(const WorkloadEnvironment& environment,
                                       const std::vector<std::string>& workload_arguments,
                                       const std::filesystem::path& trace_path,
                                       const std::vector<std::string>& tprof_arguments = {});

// Runs the workload to completion with `workload_arguments` (e.g. --reference-out FILE).
void run_workload(const WorkloadEnvironment& environment, const std::vector<std::string>& workload_arguments);

}  // namespace tprof::test
