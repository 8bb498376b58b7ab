// Processes tprof starts (`tprof record`) and, with --follow, the processes they start, traced
// with ptrace so that each is held, invisibly, from the moment libtorch is mapped until its
// probes are in: no op runs unrecorded. Once attached, it is held at each later dlopen while
// tprof looks for code torch compiled (inductor's kernels), so that none runs unprobed either.
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
//
// A thread of its own answers the traced processes' stops (userspace/session/tracees.h), so
// that they never wait on tprof's other work: only a hold waits, for the session's attach.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace tprof {

class Tracees;

class ProcessHolder {
 public:
  // Starts `command` (searched in PATH) traced, with `environment` added to ours and no signal
  // blocked; follow: also every process it starts. Blocks SIGCHLD in tprof. Throws
  // tprof::Error if the command cannot be started or traced.
  ProcessHolder(bool follow, const std::vector<std::string>& command, const std::vector<std::string>& environment);
  // Follows running processes (`tprof attach --children`): traces their threads, none of which
  // stops, so that each process they start is held. `attached`: those recorded already; the
  // others are held if they load torch. Throws tprof::Error if one cannot be traced.
  ProcessHolder(const std::vector<pid_t>& running, const std::set<pid_t>& attached);
  ~ProcessHolder();
  ProcessHolder(const ProcessHolder&) = delete;
  ProcessHolder& operator=(const ProcessHolder&) = delete;

  pid_t command() const { return command_; }  // 0 when following running processes

  // Readable when a held process waits for answer(), or when the command has ended.
  int events_fd() const;

  // What the session does for a held process, on the thread that calls answer().
  struct Callbacks {
    // libtorch_cpu is mapped, no op has run: attach. Held since `held_ns` (monotonic).
    std::function<void(pid_t pid, uint64_t held_ns)> torch_loaded;
    std::function<void(pid_t pid)> image_replaced;  // an attached process execs: its probes must go
    // CUDA loaded the CUPTI library into an attached process (at cuInit): its probe goes in
    std::function<void(pid_t pid)> device_library_loaded;
    // An attached process's dlopen is mapping objects, or has mapped them, and none of their code
    // has run: probe what torch compiled (inductor's kernels). Returns whether its later loads
    // are to be held too (false: a torch without inductor).
    std::function<bool(pid_t pid)> library_loaded;
  };

  // Runs the callback a held process waits for, if one does, then lets it go on. An exception
  // from the callback is passed on after that.
  void answer(const Callbacks& callbacks);

  // No more holds (tprof is done recording): the traced processes run on, answered until they
  // end or tprof exits (detaching a running thread would interrupt its system call).
  void stop_holding();

  // The command's status as a shell gives it (128 + signal when a signal ended it), once it
  // has ended; and how it ended, in words ("exited with status 3", "was killed by SIGSEGV").
  std::optional<int> command_status() const;
  std::string command_end() const;

  // Sends `signal` to the command while it runs (a signal meant for it that reached tprof).
  void forward_signal(int signal) const;

  // Holds not made because a thread blocked or handled both hold signals (it ran unheld).
  uint64_t holds_refused() const;

  // The holds at attached processes' later dlopens, and how long tprof took to answer them.
  struct LoadHolds {
    uint64_t count = 0;
    uint64_t ns = 0;
  };
  LoadHolds load_holds() const;

 private:
  struct Shared;
  // Starts the service thread, which traces what `begin` starts or follows (its result: the
  // command, or 0), and answers the traced processes until the holder goes.
  void start(bool follow, std::function<pid_t(Tracees&)> begin);

  std::shared_ptr<Shared> shared_;
  pid_t command_ = 0;
  std::thread service_;
};

}  // namespace tprof
