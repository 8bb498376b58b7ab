// Rebuilds torch.profiler's python_function spans from outside the process: from the Python
// stack seen at every op entry and at every stack sample between ops.
//
// A frame that stays at the same depth with the same frame address and code object across
// consecutive observations is taken to be the same invocation, unless its caller moved to
// another call site or, for an nn.Module call, its module changed: frame slots are reused by
// consecutive calls (`self.bn(self.conv(x))` runs two _call_impl frames in one slot). A span starts at the first
// observation that shows its frame and ends at the end of the last one that does (an op's
// return, or a sample's time), so its edges are exact to within the nearest op or one
// sampling period. Spans nest with each other and with the ops by construction.
#pragma once

#include <cstdint>
#include <vector>

#include "model/trace_model.h"
#include "userspace/python_stacks.h"

namespace tprof {

// One look at a thread's stack: an op (start..end) or a sample (start == end).
struct StackObservation {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  const ResolvedStack* stack = nullptr;  // never null
  bool is_op = false;
};

// A python span before naming: which frame it is, when, how deep.
struct FrameSpan {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint32_t depth = 0;
  const ResolvedFrame* frame = nullptr;  // as first seen
};

// `observations` of one thread, sorted by start (ops before samples at equal start; an
// enclosing op before the ops it calls). Returns spans sorted by start, parents first.
std::vector<FrameSpan> build_frame_spans(const std::vector<StackObservation>& observations);

// Names the spans the way torch's Python tracer does and numbers them: "Python id" from 1
// in start order over all threads, "Python parent id", and per-class "Python module id" in
// order of first appearance. `threads[i]` becomes trace.threads[i].python_spans.
void name_python_spans(const std::vector<std::vector<FrameSpan>>& threads, model::Trace& trace);

}  // namespace tprof
