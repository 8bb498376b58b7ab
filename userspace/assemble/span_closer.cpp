#include "userspace/assemble/span_closer.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <optional>
#include <tuple>

#include "op_record.h"

namespace tprof {
namespace {

constexpr uint64_t kUnknownCounter = UINT64_MAX;
// A forward op whose node has not run this long after it is forgotten first when the table
// is full (its node was freed without a backward pass).
constexpr uint64_t kForwardOpHorizonNs = 60'000'000'000;

}  // namespace

SpanCloser::SpanCloser(const std::vector<model::Operator>& operators, StackLookup find_stack, MonotonicToUnix clock,
                       std::function<std::string(uint32_t)> thread_name, model::TraceSink& sink)
    : operators_(operators),
      find_stack_(std::move(find_stack)),
      clock_(clock),
      thread_name_(std::move(thread_name)),
      sink_(sink) {}

void SpanCloser::add(uint32_t tid, OpEvent event) {
  if (event.monotonic_ns < watermark_ns_) ++counts_.late_records;
  inbox_.push_back({tid, next_arrival_++, std::move(event)});
}

bool SpanCloser::complete_newest_entry(uint32_t tid, uint32_t op_id,
                                       const std::function<void(std::vector<model::Value>&)>& complete) {
  return complete_newest(tid, op_id, false, [&](std::vector<model::Value>& inputs, bool) { complete(inputs); });
}

bool SpanCloser::complete_newest_record(
    uint32_t tid, uint32_t op_id, const std::function<void(std::vector<model::Value>&, bool returns)>& complete) {
  return complete_newest(tid, op_id, true, complete);
}

bool SpanCloser::complete_newest(uint32_t tid, uint32_t op_id, bool exits_too,
                                 const std::function<void(std::vector<model::Value>&, bool returns)>& complete) {
  // Other threads' records interleave; a thread's newest one lies further back than this only
  // when that thread has been silent, and then it is not the record sought.
  constexpr size_t kRecordsSearched = 4096;
  const size_t searched = std::min(inbox_.size(), kRecordsSearched);
  for (size_t back = 1; back <= searched; ++back) {
    Pending& pending = inbox_[inbox_.size() - back];
    // A stack sample can fall between an op's two probes, and so could an allocation.
    if (pending.tid != tid || pending.event.is_sample || pending.event.is_memory) continue;
    OpEvent& event = pending.event;
    if ((event.is_exit && !exits_too) || event.op_id != op_id || !event.has_arguments) return false;
    complete(event.arguments, event.is_exit);
    return true;
  }
  return false;
}

// A thread is announced at its first record (or step), taking the next entry id, so that its
// announcement precedes its ranges in the entry order.
SpanCloser::ThreadState& SpanCloser::thread(uint32_t tid) {
  auto [entry, is_new] = threads_.try_emplace(tid, tid, namer_);
  if (is_new) {
    ++counts_.threads;
    sink_.thread({tid, thread_name_(tid), next_entry_id_++});
  }
  return entry->second;
}

void SpanCloser::thread_running_since(uint32_t tid, uint64_t start_monotonic_ns) {
  ThreadState& state = thread(tid);
  state.timeline.root_open_since(clock_.to_unix(start_monotonic_ns));
  // Its initial step then stays at the window's start too, around that frame; the first
  // iteration still moves it inside the loop's frame (begin_next_step).
  state.step_start_pending = false;
}

void SpanCloser::open_step(uint32_t tid, uint32_t operator_index, uint64_t start_monotonic_ns) {
  ThreadState& state = thread(tid);
  OpenRange step;
  step.span.start_ns = clock_.to_unix(start_monotonic_ns);
  step.span.record_id = next_entry_id_++;
  step.span.operator_index = operator_index;
  state.steps.push_back(std::move(step));
  state.step_start_pending = true;
  step_thread_ = tid;
}

// The initial step opens at the window's start, but Python frames running then are first seen
// at the thread's first op or sample: starting it there keeps it inside their spans.
void SpanCloser::note_activity(ThreadState& state, uint64_t at_ns) {
  state.last_activity_ns = std::max(state.last_activity_ns, at_ns);
  if (!state.step_start_pending) return;
  state.step_start_pending = false;
  if (!state.steps.empty()) state.steps.back().span.start_ns = std::max(state.steps.back().span.start_ns, at_ns);
}

// --step-function: a stack showing an invocation of the step function other than the last one
// seen begins the next step, except the first invocation when its step has run nothing yet
// (recording began between two). Only between top-level ranges, so steps enclose whole ranges.
void SpanCloser::begin_step_at_new_invocation(ThreadState& state, uint64_t at_ns, const StoredStack* stack) {
  if (!stack || !state.open.empty()) return;
  const ResolvedStack& frames = stack->frames;
  size_t depth = 0;  // the outermost frame of the step function, counted from the outermost frame
  while (depth < frames.size() && !step_detection_->is_step_frame(frames[frames.size() - 1 - depth])) ++depth;
  if (depth == frames.size()) {
    // Outside the step function: once the frames that called it are gone too (the loop around
    // it has returned), what follows is no step of it.
    if (last_step_frame_ && last_step_frame_->tid == state.tid &&
        (last_step_frame_->depth == 0 || !same_invocations_down_to(last_step_frame_->stack->frames, frames,
                                                                   last_step_frame_->depth - 1))) {
      last_step_frame_.reset();
      begin_next_step(state, at_ns, stack);
    }
    return;
  }
  const bool first = !last_step_frame_ && last_step_number_ == 0;
  const bool same = last_step_frame_ && last_step_frame_->tid == state.tid && last_step_frame_->depth == depth &&
                    same_invocations_down_to(last_step_frame_->stack->frames, frames, depth);
  last_step_frame_ = StepFrame{state.tid, stack, depth};
  if (same || (first && !state.ranges_in_step)) return;
  begin_next_step(state, at_ns, stack);
}

// At a top-level op's entry or a sample between ops (the first Python code of the next
// iteration may run before its first op).
void SpanCloser::begin_step_if_iteration_ended(ThreadState& state, uint64_t at_ns, const StoredStack* stack) {
  if (step_detection_ && step_detection_->is_step_frame) {
    begin_step_at_new_invocation(state, at_ns, stack);
    return;
  }
  if (!state.step_boundary_passed || !state.open.empty() || !iteration_ended(state, stack)) return;
  state.step_boundary_passed = false;
  if (!ops_in_windows_ && last_step_number_ == 0 && first_iteration_began_before_window(state))
    mark_partial(state.steps.back(), PartialStep::kBeforeFirstBoundary);
  state.boundary_stack = nullptr;
  begin_next_step(state, at_ns, stack);
}

// The loop driving the iterations (the deepest frame around the first boundary that loops) was
// already looping at the thread's first observation: tprof came in during an iteration.
bool SpanCloser::first_iteration_began_before_window(const ThreadState& state) const {
  if (state.tid != step_thread_ || state.steps.empty() || !state.first_stack || !state.boundary_stack ||
      !step_detection_->boundary_caller_frames)
    return false;
  const ResolvedStack& boundary = state.boundary_stack->frames;
  return loop_running_in(state.first_stack->frames, boundary, step_detection_->boundary_caller_frames(boundary));
}

bool SpanCloser::iteration_ended(const ThreadState& state, const StoredStack* stack) const {
  if (!state.boundary_stack || !stack || !step_detection_->boundary_caller_frames) return true;
  const ResolvedStack& boundary = state.boundary_stack->frames;
  return !same_iteration(boundary, step_detection_->boundary_caller_frames(boundary), stack->frames);
}

// Ends the open steps, wherever they are (the initial one sits on the main thread, and the
// training may run on another), and begins the next on `thread` at `start_ns`, taking its
// record id just before the range that begins it.
void SpanCloser::begin_next_step(ThreadState& state, uint64_t start_ns, const StoredStack* stack) {
  if (const auto holder = threads_.find(step_thread_); holder != threads_.end()) {
    // The first step began before the first iteration was known: Python frames first seen
    // after it that run on into the next iteration (the loop's own function) would cross its
    // end. It starts inside them instead.
    if (last_step_number_ == 0 && stack && &holder->second == &state && !state.steps.empty()) {
      model::OpSpan& first = state.steps.back().span;
      first.start_ns = std::min(state.timeline.latest_continuing_start_after(stack->frames, first.start_ns), start_ns);
    }
    hold_ended_steps(holder->second, start_ns);
  }
  OpenRange step;
  step.span.start_ns = start_ns;
  step.span.record_id = next_entry_id_++;
  last_step_number_ = ops_in_windows_ && state.boundary_optimizer_steps > 0 ? state.boundary_optimizer_steps
                                                                            : last_step_number_ + 1;
  step.span.operator_index = step_detection_->step_operator(last_step_number_);
  step.span.step = last_step_number_;
  state.steps.push_back(std::move(step));
  state.ranges_in_step = false;
  step_thread_ = state.tid;
  before_windows_first_boundary_ = false;
}

void SpanCloser::end_steps(ThreadState& state, uint64_t end_ns) {
  for (OpenRange& step : state.steps) {
    step.span.end_ns = std::max(end_ns, step.span.start_ns);
    hand_on_step(state.tid, step);
  }
  state.steps.clear();
}

void SpanCloser::mark_partial(OpenRange& step, PartialStep part) {
  if (!step_detection_->partial_step_operator) return;
  step.partial_step = true;
  step.span.operator_index = step_detection_->partial_step_operator(part);
}

void SpanCloser::hand_on_step(uint32_t tid, OpenRange& step) {
  ++(step.partial_step ? counts_.partial_steps : counts_.steps);
  hand_on(tid, step);
}

// A step that ended where the next began is held until that next one runs an op: if it never
// does (what ran after the last iteration was no iteration: main printing, idling), the held
// one ends with its own last activity instead, inside the frames that ran the loop.
void SpanCloser::hold_ended_steps(ThreadState& state, uint64_t end_ns) {
  hand_on_held_step();
  for (OpenRange& step : state.steps) step.span.end_ns = std::max(end_ns, step.span.start_ns);
  // A window begun as the step (no boundary known then) holds only part of the iteration that
  // its first boundary ends.
  if (!state.steps.empty() && state.steps.back().window_step)
    mark_partial(state.steps.back(), PartialStep::kWindowStart);
  if (!state.steps.empty()) {
    if (ops_in_windows_ && !state.steps.back().partial_step) ++counts_.exact_steps_ended;
    const uint64_t last_activity_ns = std::max(state.last_activity_ns, state.steps.back().span.start_ns);
    held_step_ = HeldStep{state.tid, std::move(state.steps.back()), last_activity_ns};
  }
  state.steps.clear();
}

void SpanCloser::hand_on_held_step() {
  if (!held_step_) return;
  hand_on_step(held_step_->tid, held_step_->step);
  held_step_.reset();
}

void SpanCloser::advance(uint64_t watermark_monotonic_ns) {
  watermark_ns_ = std::max(watermark_ns_, watermark_monotonic_ns);
  // The records at or before the watermark, by (timestamp, arrival), sorted as small keys
  // rather than as whole records; the rest stay in the inbox, in arrival order.
  ready_.clear();
  for (size_t index = 0; index < inbox_.size(); ++index) {
    const Pending& pending = inbox_[index];
    if (pending.event.monotonic_ns <= watermark_ns_) ready_.push_back({pending.event.monotonic_ns, pending.arrival, index});
  }
  std::sort(ready_.begin(), ready_.end(),
            [](const ReadyKey& a, const ReadyKey& b) { return std::tie(a.time_ns, a.arrival) < std::tie(b.time_ns, b.arrival); });
  for (const ReadyKey& key : ready_) process(inbox_[key.index].tid, inbox_[key.index].event);
  std::erase_if(inbox_, [&](const Pending& pending) { return pending.event.monotonic_ns <= watermark_ns_; });
  if (forward_ops_.size() > kMaxRememberedForwardOps && watermark_ns_ != UINT64_MAX)
    forget_old_forward_ops(clock_.to_unix(watermark_ns_));
}

void SpanCloser::finish(uint64_t stop_monotonic_ns) {
  advance(UINT64_MAX);
  const uint64_t stop_ns = clock_.to_unix(stop_monotonic_ns);
  for (auto& [tid, state] : threads_) {
    const bool cut_off = !state.open.empty();
    for (OpenRange& range : state.open) {
      range.span.end_ns = std::max(stop_ns, range.span.start_ns);
      range.span.closed_at_stop = true;
    }
    close_ranges_down_to(state, 0, kUnknownCounter);
    // A thread still waiting where it blocked is still in those frames.
    if (state.blocked_stack) observe(state, {stop_ns, stop_ns, &state.blocked_stack->frames, false}, nullptr);
    flush_observations(state);
    // tid = tid: clang before 16 cannot capture a structured binding (scripts/fuzz.sh builds with clang 14).
    state.timeline.finish([&, tid = tid](const model::PythonSpan& span) { emit_python_span(tid, span); });
    // A detected iteration ends with the thread's last activity, as the Python frames around it
    // do; the single step of a recording without iterations, and one cut off, end at the stop.
    // A step begun after the last iteration that ran no op is no iteration: it is dropped, and
    // the iteration before it ends with its own last activity.
    if (last_step_number_ > 0 && !state.ranges_in_step && !cut_off && tid == step_thread_) {
      state.steps.clear();
      if (held_step_) held_step_->step.span.end_ns = held_step_->last_activity_ns;
    }
    if (tid == step_thread_) hand_on_held_step();
    // Stopped inside an iteration: its ops ran, its boundary did not (once it has, what the
    // stop cuts off is the iteration's tail, and the step stays one).
    if (tid == step_thread_ && last_step_number_ > 0 && !state.steps.empty() && !step_detection_->is_step_frame &&
        !state.step_boundary_passed)
      mark_partial(state.steps.back(), PartialStep::kAfterLastBoundary);
    end_steps(state, last_step_number_ > 0 && !cut_off && state.last_activity_ns != 0 ? state.last_activity_ns : stop_ns);
  }
}

void SpanCloser::process(uint32_t tid, OpEvent& event) {
  if (event.window_edge != OpWindowEdge::kNone) {
    window_edge(event.window_edge, clock_.to_unix(event.monotonic_ns), event.optimizer_steps);
    return;
  }
  if (outside_windows(event)) {
    ++counts_.outside_windows;
    return;
  }
  ThreadState& state = thread(tid);
  state.blocked_stack = nullptr;
  if (event.is_memory) {
    memory(state, event);
  } else if (event.is_sample) {
    sample(state, event);
  } else if (event.is_exit) {
    exit(state, event);
  } else {
    enter(state, event);
  }
}

void SpanCloser::enter(ThreadState& state, OpEvent& event) {
  const uint64_t start_ns = clock_.to_unix(event.monotonic_ns);
  const StoredStack* stack = find_stack(event.python_stack_id);
  if (!state.first_stack) state.first_stack = stack;
  begin_step_if_iteration_ended(state, start_ns, stack);
  note_activity(state, start_ns);
  if (state.open.empty() && state.tid == step_thread_) {
    state.ranges_in_step = true;
    hand_on_held_step();
  }
  OpenRange range;
  model::OpSpan& span = range.span;
  span.start_ns = start_ns;
  span.record_id = next_entry_id_++;
  span.parent_record_id = !state.open.empty()   ? state.open.back().span.record_id
                          : !state.steps.empty() ? state.steps.back().span.record_id
                                                 : 0;
  span.operator_index = event.op_id;
  span.step = before_windows_first_boundary_ ? model::OpSpan::kNoStep : last_step_number_;
  span.depth = static_cast<uint32_t>(state.open.size());
  span.arguments_recorded = event.has_arguments;
  span.inputs = std::move(event.arguments);
  if (flops_estimator_ && span.arguments_recorded) span.flops = flops_estimator_(operators_.at(span.operator_index), span.inputs);
  span.sequence_number = event.sequence_number;
  span.forward_thread = event.forward_thread;
  range.counter_at_entry = event.sequence_counter;
  range.optimizer_steps = event.optimizer_steps;
  range.stack = stack;
  // Every op that shows no stack while stacks are on is counted, whatever lost it (BPF says why).
  if (find_stack_ && !range.stack && operators_.at(span.operator_index).kind == model::RangeKind::kOperator)
    ++counts_.ops_without_python_stack;
  if (range.stack) observe_range_start(state, range);
  state.open.push_back(std::move(range));
}

// An exit closes the innermost open range of its operator and every range inside it: those
// lost their own exits (a lost record), so they end here, flagged return_missing.
void SpanCloser::exit(ThreadState& state, OpEvent& event) {
  auto match = std::find_if(state.open.rbegin(), state.open.rend(),
                            [&](const OpenRange& range) { return range.span.operator_index == event.op_id; });
  if (match == state.open.rend()) {
    ++counts_.unmatched_returns;
    return;
  }
  const size_t matched_depth = static_cast<size_t>(state.open.rend() - match) - 1;
  const uint64_t end_ns = clock_.to_unix(event.monotonic_ns);
  note_activity(state, end_ns);
  if (event.has_arguments) state.open[matched_depth].span.outputs = std::move(event.arguments);
  for (size_t depth = matched_depth; depth < state.open.size(); ++depth) {
    model::OpSpan& span = state.open[depth].span;
    span.end_ns = end_ns;
    const bool own_exit = depth == matched_depth;
    span.unwound = own_exit && event.exit_cause == RANGE_EXIT_UNWOUND;
    span.return_missing = !own_exit || event.exit_cause == RANGE_EXIT_INFERRED;
  }
  close_ranges_down_to(state, matched_depth, event.sequence_counter);
}

namespace {

// The first sequence number in `made` (the op's whole counter range) that none of its children
// claims: the backward node the op itself created, as the innermost op torch links it to.
template <typename Range>
std::optional<uint64_t> own_node(Range made, const std::vector<Range>& made_by_children) {
  for (uint64_t sequence = made.first; sequence < made.end; ++sequence) {
    const bool claimed = std::any_of(made_by_children.begin(), made_by_children.end(), [&](const Range& child) {
      return child.first <= sequence && sequence < child.end;
    });
    if (!claimed) return sequence;
  }
  return std::nullopt;
}

}  // namespace

// Closes the open ranges from `depth` up, their ends already set. Innermost first: which
// backward node each created, from the thread's sequence counter at its entry and at its exit
// (known only for the range at `depth`, whose exit this is; its whole range is handed up to its
// parent), and its observation's end. Then they go to the sink outermost first, so that a
// parent and child that end together (unwound, cut off at the stop) are written parent first,
// as readers that keep file order for equal ranges expect.
void SpanCloser::close_ranges_down_to(ThreadState& state, size_t depth, uint64_t counter_at_exit) {
  for (size_t at = state.open.size(); at-- > depth;) {
    OpenRange& range = state.open[at];
    const uint64_t counter = at == depth ? counter_at_exit : kUnknownCounter;
    if (range.counter_at_entry != kUnknownCounter && counter != kUnknownCounter && counter > range.counter_at_entry) {
      const SequenceRange made{range.counter_at_entry, counter};
      if (const auto sequence = own_node(made, range.made_by_children))
        range.span.sequence_number = static_cast<int64_t>(*sequence);
      if (at > 0) state.open[at - 1].made_by_children.push_back(made);
    }
    if (range.observation != SIZE_MAX) state.observations[range.observation].end_ns = range.span.end_ns;
  }
  for (size_t at = depth; at < state.open.size(); ++at) {
    hand_on(state.tid, state.open[at]);
    link_forward_backward(state.tid, state.open[at].span);
    if (step_detection_ && step_detection_->is_boundary(operators_.at(state.open[at].span.operator_index))) {
      state.step_boundary_passed = true;
      boundary_seen_ = true;
      state.boundary_stack = state.open[at].stack;
      state.boundary_optimizer_steps = state.open[at].optimizer_steps;
    }
  }
  state.open.resize(depth);
  if (state.open.empty()) flush_observations(state);
}

void SpanCloser::window_edge(OpWindowEdge edge, uint64_t at_ns, uint32_t optimizer_steps) {
  if (!ops_in_windows_) return;
  if (edge == OpWindowEdge::kOpened && !ops_window_open_) open_ops_window(at_ns, optimizer_steps);
  if (edge == OpWindowEdge::kClosing && ops_window_open_) close_ops_window(at_ns);
}

// CUDA calls', inductor kernels' and wait counters' probes are not windowed (nor is the stack
// sampler).
bool SpanCloser::recorded_all_along(uint32_t operator_index) const {
  const model::RangeKind kind = operators_.at(operator_index).kind;
  return kind == model::RangeKind::kCudaRuntime || kind == model::RangeKind::kCudaDriver ||
         kind == model::RangeKind::kCompiledKernel || kind == model::RangeKind::kWaitCounter;
}

bool SpanCloser::outside_windows(const OpEvent& event) const {
  if (!ops_in_windows_ || ops_window_open_ || event.is_sample || !knows_operator(event.op_id)) return false;
  return !recorded_all_along(event.op_id);
}

// What runs before the window's first boundary is the rest of an iteration begun unseen. While
// no boundary has ever been seen (in a window, or counted in BPF before it), the window itself
// is the step, as one ProfilerStep#0 covers a plain recording without any: ProfilerStep#K for
// the window K (from 0).
void SpanCloser::open_ops_window(uint64_t at_ns, uint32_t optimizer_steps) {
  ops_window_open_ = true;
  if (optimizer_steps > 0) boundary_seen_ = true;
  ThreadState& state = thread(step_thread_);
  OpenRange step;
  step.span.start_ns = at_ns;
  step.span.record_id = next_entry_id_++;
  step.span.step = boundary_seen_ ? model::OpSpan::kNoStep : counts_.op_windows;
  before_windows_first_boundary_ = boundary_seen_;
  step.window_step = !boundary_seen_;
  if (step.window_step) step.span.operator_index = step_detection_->step_operator(counts_.op_windows);
  state.steps.push_back(std::move(step));
  if (boundary_seen_) mark_partial(state.steps.back(), PartialStep::kWindowStart);
  state.step_boundary_passed = false;
  state.ranges_in_step = false;
  ++counts_.op_windows;
}

// The probes of the ranges still open are gone: their exits will not come. The step open now
// would end where the next begins, unseen: it is only part of an iteration. An ended one
// waiting for its successor's first op is whole.
void SpanCloser::close_ops_window(uint64_t at_ns) {
  ops_window_open_ = false;
  hand_on_held_step();
  for (auto& [tid, state] : threads_) {
    size_t depth = 0;
    while (depth < state.open.size() && recorded_all_along(state.open[depth].span.operator_index)) ++depth;
    for (size_t at = depth; at < state.open.size(); ++at) {
      state.open[at].span.end_ns = std::max(at_ns, state.open[at].span.start_ns);
      state.open[at].span.closed_at_stop = true;
    }
    close_ranges_down_to(state, depth, kUnknownCounter);
    for (OpenRange& step : state.steps)
      if (!step.partial_step && !step.window_step) mark_partial(step, PartialStep::kWindowEnd);
    end_steps(state, at_ns);
    state.step_boundary_passed = false;
    state.boundary_stack = nullptr;
  }
}

void SpanCloser::hand_on(uint32_t tid, const OpenRange& range) {
  ++counts_.ops;
  if (range_observer_) range_observer_(tid, range.span);
  sink_.op({tid, range.span, operators_.at(range.span.operator_index), range.stack ? &range.stack->printable : nullptr});
}

uint64_t SpanCloser::innermost_open_range(uint32_t tid, uint64_t unix_ns) const {
  const auto state = threads_.find(tid);
  if (state == threads_.end()) return 0;
  for (auto range = state->second.open.rbegin(); range != state->second.open.rend(); ++range)
    if (range->span.start_ns <= unix_ns) return range->span.record_id;
  for (auto step = state->second.steps.rbegin(); step != state->second.steps.rend(); ++step)
    if (step->span.start_ns <= unix_ns) return step->span.record_id;
  return 0;
}

// Kineto's fwdbwd: a backward node with sequence number s links to the forward op that created
// node s, when exactly one op did so far (sequence numbers count per thread, and tprof cannot
// map torch's logical forward-thread ids to OS threads).
void SpanCloser::link_forward_backward(uint32_t tid, const model::OpSpan& span) {
  if (span.sequence_number < 0) return;
  const model::RangeKind kind = operators_.at(span.operator_index).kind;
  if (kind == model::RangeKind::kOperator) {
    const auto [entry, is_new] = forward_ops_.try_emplace(span.sequence_number, ForwardOp{tid, span.start_ns, false});
    if (!is_new) entry->second.ambiguous = true;
  } else if (kind == model::RangeKind::kBackwardNode) {
    const auto creator = forward_ops_.find(span.sequence_number);
    if (creator == forward_ops_.end()) return;
    if (!creator->second.ambiguous)
      sink_.flow({next_flow_id_++, creator->second.tid, creator->second.start_ns, tid, span.start_ns});
    forward_ops_.erase(creator);
  }
}

void SpanCloser::forget_old_forward_ops(uint64_t now_ns) {
  std::erase_if(forward_ops_, [&](const auto& entry) { return entry.second.start_ns + kForwardOpHorizonNs < now_ns; });
  if (forward_ops_.size() > kMaxRememberedForwardOps) forward_ops_.clear();
}

void SpanCloser::sample(ThreadState& state, const OpEvent& event) {
  const StoredStack* stack = find_stack(event.python_stack_id);
  if (!stack) return;
  const uint64_t at_ns = clock_.to_unix(event.monotonic_ns);
  if (!state.first_stack) state.first_stack = stack;
  begin_step_if_iteration_ended(state, at_ns, stack);
  note_activity(state, at_ns);
  observe(state, {at_ns, at_ns, &stack->frames, false}, nullptr);
  if (state.open.empty()) flush_observations(state);
  if (event.blocked) state.blocked_stack = stack;
}

// The innermost range open on a thread: an op, else its step; null: none.
SpanCloser::OpenRange* SpanCloser::innermost_range(ThreadState& state) {
  return !state.open.empty() ? &state.open.back() : !state.steps.empty() ? &state.steps.back() : nullptr;
}

void SpanCloser::memory(ThreadState& state, const OpEvent& event) {
  if (!memory_) return;
  OpenRange* innermost = innermost_range(state);
  const uint64_t time_ns = clock_.to_unix(event.monotonic_ns);
  std::optional<model::MemoryEvent> block =
      memory_->take(event, event.memory_bytes > 0 ? find_stack(event.python_stack_id) : nullptr,
                    innermost ? innermost->span.operator_index : UINT32_MAX, time_ns);
  if (!block) return;
  const bool device = block->device_type != 0;
  const auto count = [&](model::OpSpan& span) { (device ? span.device_memory_bytes : span.cpu_memory_bytes) += block->bytes; };
  for (OpenRange& step : state.steps) count(step.span);
  for (OpenRange& range : state.open) count(range.span);
  if (innermost) (device ? innermost->span.self_device_memory_bytes : innermost->span.self_cpu_memory_bytes) += block->bytes;
  block->time_ns = time_ns;
  block->tid = state.tid;
  block->external_id = innermost ? innermost->span.record_id : 0;
  block->range_name = innermost ? &operators_.at(innermost->span.operator_index).name : nullptr;
  sink_.memory(*block);
}

std::optional<model::MemorySummary> SpanCloser::memory_summary(std::optional<uint64_t> cycle_start_unix_ns) const {
  if (!memory_) return std::nullopt;
  return memory_->summary(cycle_start_unix_ns);
}

// The stored stack a record names; null for none, and counted when the record named one that
// was never copied (gone from the BPF map by then, or past the store's bound).
const StoredStack* SpanCloser::find_stack(uint64_t stack_id) {
  if (!find_stack_ || stack_id == 0) return nullptr;
  const StoredStack* stack = find_stack_(stack_id);
  if (!stack) ++counts_.stacks_not_copied;
  return stack;
}

void SpanCloser::observe_range_start(ThreadState& state, OpenRange& range) {
  const ResolvedStack* lasting =
      lasting_frames(*range.stack, operators_.at(range.span.operator_index).kind);
  observe(state, {range.span.start_ns, 0, lasting, true}, &range.observation);
}

// An op's stack holds while it runs: Python waits for it to return. A record_function range's
// was taken inside record_function.__enter__, and a wait counter's inside its guard's __enter__
// (C++), which return at once while the range stays open; so do what entered them: a
// @contextmanager's __enter__ and the generator it resumes (torch's dynamo_timed), contextlib's
// ExitStack.enter_context. Only the frames around the `with` that entered the range last it: those
// outside the innermost run of entering frames (frames named __enter__ or enter_context, and any
// frame one of those called). Kept for the store's lifetime like the stack itself; the whole
// stack when no such frame is on it (a range opened from C++, or a `with` of the guard itself).
const ResolvedStack* SpanCloser::lasting_frames(const StoredStack& stack, model::RangeKind kind) {
  if (kind != model::RangeKind::kUserAnnotation && kind != model::RangeKind::kWaitCounter) return &stack.frames;
  const ResolvedStack& frames = stack.frames;  // innermost first
  const auto entering = [&](size_t at) {
    return at < frames.size() && (frames[at].function == "__enter__" || frames[at].function == "enter_context");
  };
  size_t lasting_from = 0;
  for (size_t at = 0; at < frames.size() && (entering(at) || entering(at + 1)); ++at)
    if (entering(at)) lasting_from = at + 1;
  if (lasting_from == 0) return &frames;
  auto [callers, added] = enter_callers_.try_emplace(&stack);
  if (added) callers->second.assign(frames.begin() + static_cast<std::ptrdiff_t>(lasting_from), frames.end());
  return &callers->second;
}

void SpanCloser::observe(ThreadState& state, const StackObservation& observation, size_t* index) {
  if (ops_in_windows_) return;
  if (state.dropping_observations || waiting_observations_ >= kMaxWaitingObservations) {
    state.dropping_observations = true;
    ++counts_.python_timeline_lost;
    return;
  }
  if (index) *index = state.observations.size();
  state.observations.push_back(observation);
  ++waiting_observations_;
}

void SpanCloser::flush_observations(ThreadState& state) {
  for (const StackObservation& observation : state.observations)
    state.timeline.observe(observation, [&](const model::PythonSpan& span) { emit_python_span(state.tid, span); });
  waiting_observations_ -= state.observations.size();
  state.observations.clear();
  state.dropping_observations = false;
}

void SpanCloser::emit_python_span(uint32_t tid, const model::PythonSpan& span) {
  ++counts_.python_spans;
  sink_.python_span(tid, span);
}

}  // namespace tprof
