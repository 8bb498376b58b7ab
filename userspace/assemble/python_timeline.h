// Rebuilds torch.profiler's python_function spans from outside the process, as recording goes:
// from the Python stack seen at every op entry and at every stack sample between ops.
//
// A frame that stays at the same depth with the same frame address and code object across
// consecutive observations is taken to be the same invocation, unless its caller moved to
// another call site or, for an nn.Module call, its module changed: frame slots are reused by
// consecutive calls (`self.bn(self.conv(x))` runs two _call_impl frames in one slot). A span
// starts at the first observation that shows its frame and ends at the end of the last one
// that does (an op's return, or a sample's time), so its edges are exact to within the nearest
// op or one sampling period. Spans nest with each other and with the ops by construction.
//
// Inside an op, an edge set by a sample moves out to the nearest time the frame is known to be
// gone: the previous observation (or the end of the frame closed just before), and the next one
// or the op's return. A sample can land inside a call of the target's own that tprof sees from
// elsewhere (a CUDA API call, from CUPTI): that call began and ended inside the frames the
// sample shows, after the previous observation and before the next, so the widened span
// encloses it instead of cutting it. Between top-level ops the edges stay at the samples: step
// boundaries fall there.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/trace_model.h"
#include "symbolizer/python/python_stacks.h"

namespace tprof {

// One look at a thread's stack: an op (start..end) or a sample (start == end).
struct StackObservation {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  const ResolvedStack* stack = nullptr;  // never null
  bool is_op = false;
};

// Names and numbers python spans the way torch's Python tracer does, process-wide: "Python
// id" from 1 in the order spans open, and per-class "Python module id" per instance in order
// of first appearance.
class PythonSpanNamer {
 public:
  model::PythonSpan open(const ResolvedFrame& frame, uint64_t start_ns, uint32_t depth, uint64_t parent_python_id);

 private:
  uint64_t next_python_id_ = 1;
  std::map<std::string, std::unordered_map<uint64_t, int64_t>, std::less<>> module_ids_;
};

// Whether `now`, the stack at a top-level op after `boundary` (the stack where an iteration
// ended, such as the call of Optimizer.step), is still in that iteration: its frames continue
// the outermost `compared` frames of `boundary` (the boundary's caller and those around it),
// none of them back at an earlier instruction (a loop around the call went round) or called
// anew. Frames deeper than `compared` (the optimizer's own) are expected to have returned. Not
// the same iteration either once the frame running the loop around it has returned.
bool same_iteration(const ResolvedStack& boundary, size_t compared, const ResolvedStack& now);

// Whether the loop driving the iterations around `boundary` (driving_loop_depth) was already
// running in `earlier`, a stack seen before it: the same invocation of its frame, inside a loop
// that also spans the boundary's instruction. False when no such loop is known.
bool loop_running_in(const ResolvedStack& earlier, const ResolvedStack& boundary, size_t compared);

// Whether the frames of `before` and `now` (seen in that order) from the outermost down to
// `depth` levels below it are the same invocations: none returned and was called anew.
bool same_invocations_down_to(const ResolvedStack& before, const ResolvedStack& now, size_t depth);

// One thread's python_function spans. Observations come in start order (ops before samples
// at equal start; an enclosing op before the ops it calls), each op with its end; a span is
// handed to `emit` once a later observation shows its frame gone, or at finish().
class PythonTimeline {
 public:
  using Emit = std::function<void(const model::PythonSpan&)>;
  explicit PythonTimeline(PythonSpanNamer& namer) : namer_(&namer) {}

  void observe(const StackObservation& observation, const Emit& emit);
  void finish(const Emit& emit);  // closes every span still open
  // The outermost frame of the first stack observed began no later than `start_ns`: what the
  // thread runs in for its whole life (the main thread's <module>), already running when
  // recording began, as torch opens the frames on the stack when it starts.
  void root_open_since(uint64_t start_ns) { root_open_since_ = start_ns; }
  // The latest start, later than `after_ns`, of the spans still open whose frames `next` (a
  // stack about to be observed) continues; `after_ns` if none.
  uint64_t latest_continuing_start_after(const ResolvedStack& next, uint64_t after_ns) const;

 private:
  struct OpenFrame {
    model::PythonSpan span;
    uint64_t last_seen_ns;
    // Last seen by a sample inside an op: the span may end as late as this (that op's return)
    // or the next observation that shows the frame gone, whichever is first. 0: at last_seen_ns.
    uint64_t may_end_by_ns = 0;
  };
  struct EnclosingOp {
    uint64_t end_ns;
    const ResolvedStack* stack;
  };
  // Closes the frames from `depth` down; `gone_ns` is when they are known to be gone (the
  // start of the observation that shows it; UINT64_MAX at finish).
  void close_down_to(size_t depth, uint64_t gone_ns, const Emit& emit);
  void see(OpenFrame& frame, const StackObservation& observation, uint64_t enclosing_op_end_ns) const;

  PythonSpanNamer* namer_;
  std::vector<OpenFrame> open_;
  const ResolvedStack* open_stack_ = nullptr;  // the last stack applied: `open_` mirrors its outer part
  std::optional<uint64_t> root_open_since_;
  std::vector<EnclosingOp> enclosing_ops_;
  // The latest time known to show no frame deeper than those open: an observation's start, an
  // op's return, a closed span's end. A frame first seen after it by a sample began later.
  uint64_t settled_ns_ = 0;
};

}  // namespace tprof
