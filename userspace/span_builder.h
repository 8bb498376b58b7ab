// Rebuilds properly nested op spans per thread from the entry and exit records of the op
// tracer. Records of one thread are sorted by timestamp first (records from different CPUs
// can reach the ring buffer out of order), then replayed against a per-thread call stack.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "model/trace_model.h"
#include "userspace/wall_clock.h"

namespace tprof {

// An entry or exit of a range: an op, an annotation or an autograd node.
struct OpEvent {
  uint64_t monotonic_ns = 0;
  uint32_t op_id = 0;            // index of its model::Operator
  bool is_exit = false;
  uint8_t exit_cause = 0;        // exits: enum range_exit_cause (bpf/op_record.h)
  uint64_t python_stack_id = 0;  // entries only; 0: none
  bool has_arguments = false;    // entries: inputs were captured; exits: returns were
  std::vector<model::Value> arguments;
  int64_t sequence_number = -1;  // entries of autograd nodes
  uint64_t forward_thread = 0;
  // Op entries and exits: the thread's autograd sequence counter; SEQUENCE_COUNTER_UNKNOWN
  // (all ones) when not read.
  uint64_t sequence_counter = UINT64_MAX;
};

struct BuiltThreads {
  std::vector<model::ThreadTrack> threads;  // by tid; names left empty; record ids unset
  // Parallel to threads[i].spans: the Python stack id seen at each op's entry (0: none).
  std::vector<std::vector<uint64_t>> span_stack_ids;
  uint64_t unmatched_returns = 0;           // exits whose entry was never seen
};

class SpanBuilder {
 public:
  void add(uint32_t tid, OpEvent event) { events_by_thread_[tid].push_back(std::move(event)); }

  // Replays every thread. An op still open at the end is closed at `stop_monotonic_ns` and
  // flagged closed_at_stop. An exit of an unwound range flags it unwound, an inferred one
  // return_missing. An exit that skips open inner ops closes them at its own time, flagged
  // return_missing (their exits were lost).
  BuiltThreads build(uint64_t stop_monotonic_ns, const MonotonicToUnix& clock) &&;

 private:
  std::unordered_map<uint32_t, std::vector<OpEvent>> events_by_thread_;
};

// Gives every span and annotation its process-wide record id: 1, 2, 3... in order of start
// time (an enclosing range before what it encloses), as torch's RecordFunction handles are
// handed out at op entry.
void assign_record_ids(model::Trace& trace);

}  // namespace tprof
