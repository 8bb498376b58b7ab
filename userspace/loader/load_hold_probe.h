// The hold probe (bpf/load_hold.bpf.c): linked to a function of a traced process, it asks the
// calling thread to stop with a signal its tracer (tprof) cancels. On the dynamic loader's
// `_dl_debug_state`, which ld.so calls once a dlopen's objects are mapped and before their code
// runs; on the CUDA injection library's `InitializeInjection`, which cuInit calls once it has
// loaded it. userspace/session/tracees.h does the tracing; this class owns the BPF side.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

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

  // Where a process is held.
  enum class Site {
    kLoader,     // the dynamic loader's _dl_debug_state, at every dlopen
    kInjection,  // the CUDA injection library's InitializeInjection, at cuInit
  };

  // Links the probe to the threads of `pid` at `site`, the function `function` of `binary_path`
  // (opened from here), which need not be mapped yet. Throws tprof::Error.
  void link(pid_t pid, Site site, const std::string& binary_path, const char* function);
  // Holds `pid` at its loader's notifications only once a dlopen's objects are mapped, as the
  // loader's r_debug at `r_debug_address` in it says (glibc also notifies before). Where that
  // cannot be noted (the map is full), it is held at both, as without it.
  void hold_only_once_mapped(pid_t pid, uint64_t r_debug_address);
  // Every link of `pid` goes (an exec, or nothing more to hold it for).
  void unlink(pid_t pid);
  // The link of `pid` at `site` goes.
  void unlink(pid_t pid, Site site);

  // Where the probe asked thread `tid` to stop with `signal`, if it did; the request is
  // forgotten, so a later signal of that number from anywhere else is the target's own.
  std::optional<Site> claim(pid_t tid, int signal);

  // Holds the probe could not ask for: the thread blocked or handled both signals it may use.
  uint64_t refused() const;

 private:
  struct SkeletonDeleter {
    void operator()(load_hold* skeleton) const;
  };
  std::unique_ptr<load_hold, SkeletonDeleter> skeleton_;
  std::map<std::pair<pid_t, Site>, BpfLink> links_;
};

}  // namespace tprof
