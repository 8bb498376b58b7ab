// The OS thread of each CUDA API call CUPTI reports. CUPTI names a call's thread by the low 32
// bits of its pthread_self(), which on x86-64 glibc is the thread's FS base; a BPF task iterator
// (bpf/thread_bases.bpf.c) reads each thread's base from the kernel, so tprof needs neither a
// CUPTI subscriber of its own (which would take the target's torch.profiler's place) nor to
// read the target's memory.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <unordered_set>

struct thread_bases;

namespace tprof {

class ThreadBases {
 public:
  // Loads the iterator. Throws tprof::Error.
  ThreadBases();
  ~ThreadBases();
  ThreadBases(const ThreadBases&) = delete;
  ThreadBases& operator=(const ThreadBases&) = delete;

  // The threads of process `pid` now: low half of the FS base -> tid. Empty if it is gone.
  std::unordered_map<uint32_t, uint32_t> read(pid_t pid) const;

 private:
  struct SkeletonDeleter {
    void operator()(thread_bases* skeleton) const;
  };
  std::unique_ptr<thread_bases, SkeletonDeleter> skeleton_;
};

// One process's CUPTI thread ids, read again when one is new. A thread that has exited by then
// stays unknown (0), and is not looked for twice.
class CuptiThreadNames {
 public:
  explicit CuptiThreadNames(pid_t pid) : pid_(pid) {}
  uint32_t os_thread(uint32_t cupti_thread);  // 0: unknown

 private:
  const pid_t pid_;
  std::unique_ptr<ThreadBases> bases_;  // loaded at the first call
  bool unavailable_ = false;            // the iterator would not load
  std::unordered_map<uint32_t, uint32_t> threads_;
  std::unordered_set<uint32_t> looked_for_;
};

}  // namespace tprof
