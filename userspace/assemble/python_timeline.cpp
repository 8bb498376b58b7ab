#include "userspace/assemble/python_timeline.h"

#include <algorithm>
#include <cstdint>

namespace tprof {
namespace {

// The frame `depth` levels below the outermost one.
const ResolvedFrame& frame_at_depth(const ResolvedStack& stack, size_t depth) {
  return stack[stack.size() - 1 - depth];
}

// Whether a frame seen at `earlier`'s instruction and then at `later`'s can be one invocation:
// an invocation moves backwards only through a loop of its code. Unknown loops: assume it can.
bool can_have_moved(const ResolvedFrame& earlier, const ResolvedFrame& later) {
  if (later.instruction >= earlier.instruction || earlier.loops == nullptr) return true;
  return symbolizer::loop_spans(*earlier.loops, later.instruction, earlier.instruction);
}

// Whether the frames at `depth` of two stacks, `a` seen before `b`, are one invocation: same
// frame slot and code, same module object, their callers suspended at the same instruction (a
// caller cannot move on while its callee runs), and the frame not back at an earlier
// instruction no loop leads to: the same function called again from the same call site reuses
// the slot (3.11+), and only its own instruction tells the calls apart.
bool same_invocation(const ResolvedStack& a, const ResolvedStack& b, size_t depth) {
  const ResolvedFrame& frame_a = frame_at_depth(a, depth);
  const ResolvedFrame& frame_b = frame_at_depth(b, depth);
  if (frame_a.frame_address != frame_b.frame_address || frame_a.code_address != frame_b.code_address ||
      frame_a.module_self != frame_b.module_self)
    return false;
  if (depth > 0 && frame_at_depth(a, depth - 1).instruction != frame_at_depth(b, depth - 1).instruction) return false;
  return can_have_moved(frame_a, frame_b);
}

// Whether `inner` continues `outer`: every frame of `outer` sits at the same depth of `inner`.
// Ops on one line share one stored stack, so the same object is the common case.
bool extends(const ResolvedStack& inner, const ResolvedStack& outer) {
  if (&inner == &outer) return true;
  if (inner.size() < outer.size()) return false;
  for (size_t depth = 0; depth < outer.size(); ++depth)
    if (!same_invocation(outer, inner, depth)) return false;
  return true;
}

}  // namespace

// The deepest of the boundary's outermost `compared` frames that is inside a loop of its own
// code: the loop that drives the iterations. SIZE_MAX if none is known.
size_t driving_loop_depth(const ResolvedStack& boundary, size_t compared) {
  size_t found = SIZE_MAX;
  for (size_t depth = 0; depth < std::min(compared, boundary.size()); ++depth) {
    const ResolvedFrame& frame = frame_at_depth(boundary, depth);
    if (frame.loops && symbolizer::loop_spans(*frame.loops, frame.instruction, frame.instruction)) found = depth;
  }
  return found;
}

bool same_invocations_down_to(const ResolvedStack& before, const ResolvedStack& now, size_t depth) {
  if (before.size() <= depth || now.size() <= depth) return false;
  for (size_t level = 0; level <= depth; ++level)
    if (!same_invocation(before, now, level)) return false;
  return true;
}

bool loop_running_in(const ResolvedStack& earlier, const ResolvedStack& boundary, size_t compared) {
  const size_t loop_depth = driving_loop_depth(boundary, compared);
  if (loop_depth == SIZE_MAX || !same_invocations_down_to(earlier, boundary, loop_depth)) return false;
  const ResolvedFrame& then = frame_at_depth(earlier, loop_depth);
  const ResolvedFrame& at_boundary = frame_at_depth(boundary, loop_depth);
  const auto [first, last] = std::minmax(then.instruction, at_boundary.instruction);
  return symbolizer::loop_spans(*at_boundary.loops, first, last);
}

bool same_iteration(const ResolvedStack& boundary, size_t compared, const ResolvedStack& now) {
  if (const size_t loop_depth = driving_loop_depth(boundary, compared); loop_depth != SIZE_MAX) {
    // The function running the loop has returned: the loop is over, and so is the iteration.
    if (now.size() <= loop_depth) return false;
    // Or it runs on past the loop (a script's loop at module level, then its sleep or save):
    // no loop spans the boundary's instruction and where the frame is now.
    const ResolvedFrame& at_boundary = frame_at_depth(boundary, loop_depth);
    const ResolvedFrame& current = frame_at_depth(now, loop_depth);
    if (same_invocation(boundary, now, loop_depth) && current.instruction > at_boundary.instruction &&
        !symbolizer::loop_spans(*at_boundary.loops, at_boundary.instruction, current.instruction))
      return false;
  }
  const size_t depths = std::min({compared, boundary.size(), now.size()});
  for (size_t depth = 0; depth < depths; ++depth) {
    if (!same_invocation(boundary, now, depth)) return false;
    if (frame_at_depth(now, depth).instruction < frame_at_depth(boundary, depth).instruction) return false;
  }
  return true;
}

model::PythonSpan PythonSpanNamer::open(const ResolvedFrame& frame, uint64_t start_ns, uint32_t depth,
                                        uint64_t parent_python_id) {
  model::PythonSpan span;
  span.start_ns = start_ns;
  span.depth = depth;
  span.python_id = next_python_id_++;
  span.parent_python_id = parent_python_id;
  if (frame.module_class) {
    auto& instances = module_ids_[*frame.module_class];
    span.module_id = instances.emplace(frame.module_self, static_cast<int64_t>(instances.size())).first->second;
    span.name = "nn.Module: " + *frame.module_class + "_" + std::to_string(span.module_id);
  } else {
    span.name = frame.file + "(" + std::to_string(frame.first_line) + "): " + frame.function;
    if (frame.qualified_name != frame.function) span.qualified_name = frame.qualified_name;
  }
  return span;
}

// Frames that close together are handed on outermost first: where their times tie exactly
// (both first seen by one observation, last seen by another), readers that keep file order
// for equal ranges then nest them the right way round.
void PythonTimeline::close_down_to(size_t depth, uint64_t gone_ns, const Emit& emit) {
  for (size_t at = depth; at < open_.size(); ++at) {
    OpenFrame& frame = open_[at];
    frame.span.end_ns = frame.last_seen_ns;
    if (frame.may_end_by_ns != 0)
      frame.span.end_ns = std::max(frame.last_seen_ns, std::min(frame.may_end_by_ns, gone_ns - 1));
    settled_ns_ = std::max(settled_ns_, frame.span.end_ns);
    emit(frame.span);
  }
  if (open_.size() > depth) open_.resize(depth);
}

// The frame shows in `observation`. An op seen later than the frame was last seen fixes its
// end there; a sample inside an op lets it end as late as that op.
void PythonTimeline::see(OpenFrame& frame, const StackObservation& observation, uint64_t enclosing_op_end_ns) const {
  if (observation.end_ns < frame.last_seen_ns) return;
  frame.may_end_by_ns = observation.is_op ? 0 : enclosing_op_end_ns;
  frame.last_seen_ns = observation.end_ns;
}

void PythonTimeline::observe(const StackObservation& observation, const Emit& emit) {
  while (!enclosing_ops_.empty() && enclosing_ops_.back().end_ns <= observation.start_ns) {
    // Frames first seen inside a range, deeper than its stack, end with it: an op's callees
    // return before it does, and a record_function range's stack is the frames around its
    // `with`, so one that ends inside a frame called there (its own __exit__) must not leave
    // that frame's span crossing its end. Seen again later, such a frame is a span of its own.
    const EnclosingOp& ended = enclosing_ops_.back();
    close_down_to(ended.stack->size(), ended.end_ns + 1, emit);
    settled_ns_ = std::max(settled_ns_, ended.end_ns);
    enclosing_ops_.pop_back();
  }
  const ResolvedStack& stack = *observation.stack;
  // Python cannot unwind below a running op: a stack seen inside an op that does not
  // continue the op's own stack is a torn read. Leave the timeline as it is.
  const bool consistent = enclosing_ops_.empty() || extends(stack, *enclosing_ops_.back().stack);
  // A sample inside an op: its edges may move out as far as the frames it shows can have run.
  const uint64_t enclosing_op_end_ns = !observation.is_op && !enclosing_ops_.empty() ? enclosing_ops_.back().end_ns : 0;
  if (observation.is_op)
    enclosing_ops_.push_back({observation.end_ns, consistent ? &stack : enclosing_ops_.back().stack});
  if (!consistent) return;

  size_t shared = 0;
  if (&stack == open_stack_) {
    shared = std::min(open_.size(), stack.size());  // the same stored stack: every frame continues
  } else {
    while (shared < open_.size() && shared < stack.size() && same_invocation(*open_stack_, stack, shared)) ++shared;
  }
  close_down_to(shared, observation.start_ns, emit);
  for (size_t depth = 0; depth < shared; ++depth) see(open_[depth], observation, enclosing_op_end_ns);
  uint64_t start_ns = observation.start_ns;
  if (enclosing_op_end_ns != 0) start_ns = std::min(start_ns, settled_ns_ + 1);
  for (size_t depth = shared; depth < stack.size(); ++depth) {
    const uint64_t parent_id = depth > 0 ? open_[depth - 1].span.python_id : 0;
    uint64_t frame_start_ns = start_ns;
    if (depth == 0 && root_open_since_) frame_start_ns = std::min(frame_start_ns, *root_open_since_);
    open_.push_back({namer_->open(frame_at_depth(stack, depth), frame_start_ns, static_cast<uint32_t>(depth), parent_id),
                     0});
    see(open_.back(), observation, enclosing_op_end_ns);
  }
  if (!stack.empty()) root_open_since_.reset();
  open_stack_ = &stack;
  settled_ns_ = std::max(settled_ns_, observation.start_ns);
}

uint64_t PythonTimeline::latest_continuing_start_after(const ResolvedStack& next, uint64_t after_ns) const {
  uint64_t latest = after_ns;
  for (size_t depth = 0; open_stack_ && depth < open_.size() && depth < next.size() &&
                         (&next == open_stack_ || same_invocation(*open_stack_, next, depth));
       ++depth)
    latest = std::max(latest, open_[depth].span.start_ns);
  return latest;
}

void PythonTimeline::finish(const Emit& emit) {
  close_down_to(0, UINT64_MAX, emit);
  enclosing_ops_.clear();
  open_stack_ = nullptr;
}

}  // namespace tprof
