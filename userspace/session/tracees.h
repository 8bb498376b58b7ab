// The processes tprof traces with ptrace to hold them at torch's load (process_holder.h): what
// each of their stops means, and the answer. Used by one thread only, the tracer: ptrace takes
// requests only from the thread that attached.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "userspace/loader/load_hold_probe.h"

namespace tprof {

class Tracees {
 public:
  // What a stop asks of the session; each is called while the process waits, and it is resumed
  // when the call returns.
  struct Requests {
    std::function<void(pid_t pid)> torch_loaded;    // held with libtorch_cpu mapped: attach
    std::function<void(pid_t pid)> image_replaced;  // an attached process execs: its probes must go
    std::function<void(pid_t pid)> device_library_loaded;  // CUDA loaded libtprof_cupti (cuInit)
    // An attached process's dlopen: look for new code; whether to hold its later ones too.
    std::function<bool(pid_t pid)> library_loaded;
    std::function<void(int status, const std::string& how)> command_ended;
  };

  // follow: also trace (and hold) every process the traced ones start.
  Tracees(bool follow, Requests requests);

  // Starts `command` (searched in PATH) traced, with `environment` added to ours and no signal
  // blocked. Throws tprof::Error if it cannot be started or traced.
  pid_t launch(const std::vector<std::string>& command, const std::vector<std::string>& environment);

  // Traces the threads of a running process (none stops), so that the processes it starts are
  // traced and held; `attached`: it is recorded already, and not held itself. Throws tprof::Error
  // if it cannot be traced (a debugger traces it).
  void follow_running(pid_t pid, bool attached);

  // Answers every stop and exit waiting, without blocking.
  void handle_events();

  // No more holds: tprof is done recording. The processes stay traced (detaching a running
  // thread would interrupt its system call), answered until they end or tprof exits.
  void stop_holding();

  // Holds not made because a thread blocked or handled both hold signals (it ran unheld).
  uint64_t holds_refused() const { return loader_probe_.refused(); }

 private:
  void on_exit(pid_t tid);
  void on_stop(pid_t tid, int status);
  void on_birth(pid_t parent, int event);
  void on_new_process(pid_t pid, int birth_event);
  void on_exec(pid_t pid);
  void hold(pid_t tid, LoadHoldProbe::Site site);
  void attach_held(pid_t pid, pid_t tid);
  void probe_loader_of(pid_t pid);

  const bool follow_;
  const Requests requests_;
  LoadHoldProbe loader_probe_;
  pid_t command_ = 0;
  bool holding_ = true;
  // Held and attached: not held again for torch; a later dlopen of one held at its load of torch
  // 2.x is held while the session looks for new kernels.
  std::set<pid_t> attached_;
  // Attached processes started with CUDA_INJECTION64_PATH whose CUDA has not loaded the library
  // yet: held again when cuInit calls into it, so that its activity is recorded from then on.
  std::set<pid_t> awaiting_device_library_;
  std::set<pid_t> known_;     // processes traced (their threads' first stops are not new processes)
  // A new process and its parent's report of it come in either order: whichever comes first
  // waits here for the other (a child stays stopped until then). The value: fork or vfork.
  std::map<pid_t, int> births_reported_;
  std::set<pid_t> unreported_children_;
};

}  // namespace tprof
