// Processes tprof starts (`tprof record`) and, with --follow, the processes they start, traced
// with ptrace so that each is held, invisibly, from the moment libtorch is mapped until its
// probes are in: no op runs unrecorded.
//
// How (docs/target-safety.md, "Holding a process at torch's load"): the loader probe
// (userspace/loader/load_hold_probe.h) stops the thread whose dlopen has just mapped new objects,
// by a signal that the tracer sees first and cancels. tprof looks for libtorch_cpu in the
// process's mappings and, if it is there, attaches while the thread waits, then resumes it. The
// other threads run on; none can reach the new library, since the held thread holds the
// loader's lock. A forked child that inherits an attached libtorch is held at its first stop.
//
// The target cannot tell: ptrace-stops are not reported to its parent's waitpid, the held thread
// is at a function return (no system call is interrupted), and the signal never arrives. If
// tprof dies, the kernel detaches it and resumes every thread.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "userspace/loader/load_hold_probe.h"
#include "userspace/loader/unique_fd.h"

namespace tprof {

class ProcessHolder {
 public:
  // follow: also trace every process the traced ones start, and hold each of them. Blocks
  // SIGCHLD in tprof (it is read from events_fd()). Throws tprof::Error.
  explicit ProcessHolder(bool follow);

  // Starts `command` (searched in PATH) traced, with `environment` added to ours and no signal
  // blocked. Throws tprof::Error if it cannot be started.
  pid_t launch(const std::vector<std::string>& command, const std::vector<std::string>& environment);

  // Readable when the traced processes have something to report.
  int events_fd() const { return child_signals_.get(); }

  // What the session does for the traced processes, each called while the process waits.
  struct Callbacks {
    // A process is held with libtorch_cpu mapped and no op run yet: attach. It is resumed when
    // this returns or throws (the exception is passed on).
    std::function<void(pid_t pid)> torch_loaded;
    // An attached process replaced its image (exec): its probes must go before it runs on.
    std::function<void(pid_t pid)> image_replaced;
  };

  // Answers whatever the traced processes reported, without waiting: resumes them, passes on
  // their own signals, and calls back for each process held with torch or replaced.
  void handle_events(const Callbacks& callbacks);

  // Stops holding: processes not yet attached are no longer held (tprof is done recording),
  // though they stay traced until they end or tprof exits.
  void stop_holding();

  // The launched command's status as a shell gives it (128 + signal when a signal ended it),
  // once it has ended; how it ended, in words.
  std::optional<int> command_status() const { return command_status_; }
  const std::string& command_end() const { return command_end_; }
  pid_t command() const { return command_; }

  // Sends `signal` to the launched command (a Ctrl-C or `kill` meant for it that reached tprof).
  void forward_signal(int signal) const;

  // Holds not made because a thread blocked or handled both hold signals (it ran unheld).
  uint64_t holds_refused() const { return loader_probe_.refused(); }

 private:
  void on_exit(pid_t tid, int status);
  void on_stop(pid_t tid, int status, const Callbacks& callbacks);
  void on_birth(pid_t parent, int event, const Callbacks& callbacks);
  void on_new_process(pid_t pid, int birth_event, const Callbacks& callbacks);
  void on_exec(pid_t pid, const Callbacks& callbacks);
  void hold(pid_t tid, const Callbacks& callbacks);
  void attach_held(pid_t pid, pid_t tid, const Callbacks& callbacks);
  void probe_loader_of(pid_t pid);

  const bool follow_;
  LoadHoldProbe loader_probe_;
  UniqueFd child_signals_;
  pid_t command_ = 0;
  std::optional<int> command_status_;
  std::string command_end_;
  std::set<pid_t> attached_;  // held and attached: not held again
  std::set<pid_t> known_;     // processes traced (their threads' first stops are not new processes)
  // A new process and its parent's report of it come in either order: whichever comes first
  // waits here for the other (a child stays stopped until then). The value: fork or vfork.
  std::map<pid_t, int> births_reported_;
  std::set<pid_t> unreported_children_;
  bool holding_ = true;
};

}  // namespace tprof
