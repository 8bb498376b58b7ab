// The stack sampler's looks at the target's threads, kept per thread until the trace is built.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace tprof {

struct PythonSample {
  uint64_t monotonic_ns = 0;
  uint64_t stack_id = 0;
};

class PythonSampleLog {
 public:
  void add(uint32_t tid, const PythonSample& sample) {
    samples_by_thread_[tid].push_back(sample);
    ++count_;
  }
  uint64_t count() const { return count_; }
  // In arrival order; callers sort by time.
  const std::unordered_map<uint32_t, std::vector<PythonSample>>& by_thread() const { return samples_by_thread_; }

 private:
  std::unordered_map<uint32_t, std::vector<PythonSample>> samples_by_thread_;
  uint64_t count_ = 0;
};

}  // namespace tprof
