#include "userspace/python_timeline.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace tprof {
namespace {

// The frame `depth` levels below the outermost one.
const ResolvedFrame& frame_at_depth(const ResolvedStack& stack, size_t depth) {
  return stack[stack.size() - 1 - depth];
}

// Whether the frames at `depth` of two stacks are one invocation: same frame slot and code,
// same module object, and their callers suspended at the same instruction (a caller cannot
// move on while its callee runs).
bool same_invocation(const ResolvedStack& a, const ResolvedStack& b, size_t depth) {
  const ResolvedFrame& frame_a = frame_at_depth(a, depth);
  const ResolvedFrame& frame_b = frame_at_depth(b, depth);
  if (frame_a.frame_address != frame_b.frame_address || frame_a.code_address != frame_b.code_address ||
      frame_a.module_self != frame_b.module_self)
    return false;
  return depth == 0 || frame_at_depth(a, depth - 1).instruction == frame_at_depth(b, depth - 1).instruction;
}

// Whether `inner` continues `outer`: every frame of `outer` sits at the same depth of `inner`.
bool extends(const ResolvedStack& inner, const ResolvedStack& outer) {
  if (inner.size() < outer.size()) return false;
  for (size_t depth = 0; depth < outer.size(); ++depth)
    if (!same_invocation(inner, outer, depth)) return false;
  return true;
}

}  // namespace

std::vector<FrameSpan> build_frame_spans(const std::vector<StackObservation>& observations) {
  struct OpenFrame {
    size_t span_index;
    uint64_t last_seen_ns;
  };
  struct EnclosingOp {
    uint64_t end_ns;
    const ResolvedStack* stack;
  };
  std::vector<FrameSpan> spans;
  std::vector<OpenFrame> open;
  const ResolvedStack* open_stack = nullptr;  // the last stack applied: `open` mirrors its outer part
  std::vector<EnclosingOp> enclosing_ops;

  for (const StackObservation& observation : observations) {
    while (!enclosing_ops.empty() && enclosing_ops.back().end_ns <= observation.start_ns) enclosing_ops.pop_back();
    const ResolvedStack& stack = *observation.stack;
    // Python cannot unwind below a running op: a stack seen inside an op that does not
    // continue the op's own stack is a torn read. Leave the timeline as it is.
    const bool consistent = enclosing_ops.empty() || extends(stack, *enclosing_ops.back().stack);
    if (observation.is_op)
      enclosing_ops.push_back({observation.end_ns, consistent ? &stack : enclosing_ops.back().stack});
    if (!consistent) continue;

    size_t shared = 0;
    while (shared < open.size() && shared < stack.size() && same_invocation(*open_stack, stack, shared)) ++shared;
    while (open.size() > shared) {
      spans[open.back().span_index].end_ns = open.back().last_seen_ns;
      open.pop_back();
    }
    for (size_t depth = shared; depth < stack.size(); ++depth) {
      open.push_back({spans.size(), observation.end_ns});
      spans.push_back({observation.start_ns, 0, static_cast<uint32_t>(depth), &frame_at_depth(stack, depth)});
    }
    for (size_t depth = 0; depth < shared; ++depth)
      open[depth].last_seen_ns = std::max(open[depth].last_seen_ns, observation.end_ns);
    open_stack = &stack;
  }
  for (const OpenFrame& frame : open) spans[frame.span_index].end_ns = frame.last_seen_ns;
  return spans;
}

void name_python_spans(const std::vector<std::vector<FrameSpan>>& threads, model::Trace& trace) {
  struct Ref {
    uint64_t start_ns;
    size_t thread;
    size_t index;
  };
  std::vector<Ref> order;
  for (size_t thread = 0; thread < threads.size(); ++thread)
    for (size_t index = 0; index < threads[thread].size(); ++index)
      order.push_back({threads[thread][index].start_ns, thread, index});
  std::sort(order.begin(), order.end(), [](const Ref& a, const Ref& b) {
    return std::tie(a.start_ns, a.thread, a.index) < std::tie(b.start_ns, b.thread, b.index);
  });

  for (size_t thread = 0; thread < threads.size(); ++thread)
    trace.threads[thread].python_spans.resize(threads[thread].size());
  // torch's PythonIDVisitor: ids from 1 in event order; module ids per class, per instance
  // in order of first appearance.
  std::map<std::string, std::unordered_map<uint64_t, int64_t>> module_ids;
  uint64_t next_python_id = 1;
  for (const Ref& ref : order) {
    const FrameSpan& source = threads[ref.thread][ref.index];
    model::PythonSpan& span = trace.threads[ref.thread].python_spans[ref.index];
    span.start_ns = source.start_ns;
    span.end_ns = source.end_ns;
    span.depth = source.depth;
    span.python_id = next_python_id++;
    const ResolvedFrame& frame = *source.frame;
    if (frame.module_class) {
      auto& instances = module_ids[*frame.module_class];
      span.module_id = instances.emplace(frame.module_self, static_cast<int64_t>(instances.size())).first->second;
      span.name = "nn.Module: " + *frame.module_class + "_" + std::to_string(span.module_id);
    } else {
      span.name = frame.file + "(" + std::to_string(frame.first_line) + "): " + frame.function;
    }
  }
  for (model::ThreadTrack& thread : trace.threads) {
    std::vector<uint64_t> id_at_depth;
    for (model::PythonSpan& span : thread.python_spans) {
      id_at_depth.resize(span.depth);
      span.parent_python_id = span.depth > 0 ? id_at_depth.back() : 0;
      id_at_depth.push_back(span.python_id);
    }
  }
}

}  // namespace tprof
