// Drains the op tracer's ring buffer: op entries and exits into a SpanBuilder, stack samples
// into a PythonSampleLog. The BPF side never wakes us (BPF_RB_NO_WAKEUP), so drain() is
// called on a timer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_set>

#include "userspace/python_sample_log.h"
#include "userspace/span_builder.h"

struct ring_buffer;

namespace tprof {

class RecordConsumer {
 public:
  struct Callbacks {
    // The first time a thread id is seen, while the thread most likely still exists (so
    // that its name can be read).
    std::function<void(uint32_t tid)> on_new_thread;
    // Every Python stack id a record carries, so that its stack is copied while it is
    // still in the BPF map.
    std::function<void(uint64_t stack_id)> on_stack_id;
  };
  RecordConsumer(int ring_buffer_fd, SpanBuilder& spans, PythonSampleLog& samples, Callbacks callbacks);
  ~RecordConsumer();
  RecordConsumer(const RecordConsumer&) = delete;
  RecordConsumer& operator=(const RecordConsumer&) = delete;

  // Consumes everything available now. Throws tprof::Error on a ring-buffer failure.
  void drain();

  uint64_t records() const { return records_; }
  uint64_t malformed_records() const { return malformed_; }

 private:
  static int on_record(void* self, void* data, size_t size);

  struct RingBufferDeleter {
    void operator()(ring_buffer* ring) const;
  };
  std::unique_ptr<ring_buffer, RingBufferDeleter> ring_;
  SpanBuilder& spans_;
  PythonSampleLog& samples_;
  Callbacks callbacks_;
  std::unordered_set<uint32_t> seen_threads_;
  uint64_t records_ = 0;
  uint64_t malformed_ = 0;
};

}  // namespace tprof
