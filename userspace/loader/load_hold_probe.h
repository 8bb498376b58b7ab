// The loader-notification probe (bpf/load_hold.bpf.c): linked to a traced process's dynamic
// loader at `_dl_debug_state`, which ld.so calls once a dlopen's objects are mapped and before
// their code runs, it asks the calling thread to stop with a signal its tracer (tprof) cancels.
// userspace/session/process_holder.h does the tracing; this class owns the BPF side.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "userspace/loader/uprobe_multi.h"

struct load_hold;

namespace tprof {

class LoadHoldProbe {
 public:
  // Opens and loads the program. Throws tprof::Error.
  LoadHoldProbe();
  ~LoadHoldProbe();
  LoadHoldProbe(const LoadHoldProbe&) = delete;
  LoadHoldProbe& operator=(const LoadHoldProbe&) = delete;

  // Links the probe to the threads of `pid` at `_dl_debug_state` of `loader_path` (its ld.so,
  // opened from here), replacing a link an earlier image of the process had. Throws tprof::Error.
  void link(pid_t pid, const std::string& loader_path);
  void unlink(pid_t pid) { links_.erase(pid); }
  bool linked(pid_t pid) const { return links_.contains(pid); }

  // Whether the probe asked thread `tid` to stop with `signal`; the request is forgotten, so a
  // later signal of that number from anywhere else is the target's own.
  bool claim(pid_t tid, int signal);

  // Holds the probe could not ask for: the thread blocked or handled both signals it may use.
  uint64_t refused() const;

 private:
  struct SkeletonDeleter {
    void operator()(load_hold* skeleton) const;
  };
  std::unique_ptr<load_hold, SkeletonDeleter> skeleton_;
  std::map<pid_t, BpfLink> links_;
};

}  // namespace tprof
