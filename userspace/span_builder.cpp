#include "userspace/span_builder.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "op_record.h"

namespace tprof {
namespace {

constexpr uint64_t kUnknownCounter = UINT64_MAX;

struct SequenceRange {
  uint64_t first;
  uint64_t end;  // exclusive
};

struct OpenOp {
  uint32_t op_id;
  size_t span_index;
  uint64_t counter_at_entry = kUnknownCounter;
  std::vector<SequenceRange> made_by_children;  // nodes its finished children created
};

// The first sequence number in `made` (the op's whole counter range) that none of its children
// claims: the backward node the op itself created, as the innermost op torch links it to.
std::optional<uint64_t> own_node(SequenceRange made, const std::vector<SequenceRange>& made_by_children) {
  for (uint64_t sequence = made.first; sequence < made.end; ++sequence) {
    const bool claimed = std::any_of(made_by_children.begin(), made_by_children.end(), [&](const SequenceRange& child) {
      return child.first <= sequence && sequence < child.end;
    });
    if (!claimed) return sequence;
  }
  return std::nullopt;
}

// At the return of open[depth]: which backward node it created, if any, from the thread's
// sequence counter at its entry and here; its whole range is handed up to its parent.
void attribute_created_node(std::vector<OpenOp>& open, size_t depth, uint64_t counter_at_exit,
                            model::ThreadTrack& track) {
  const OpenOp& op = open[depth];
  if (op.counter_at_entry == kUnknownCounter || counter_at_exit == kUnknownCounter ||
      counter_at_exit <= op.counter_at_entry)
    return;
  const SequenceRange made{op.counter_at_entry, counter_at_exit};
  if (const auto sequence = own_node(made, op.made_by_children))
    track.spans[op.span_index].sequence_number = static_cast<int64_t>(*sequence);
  if (depth > 0) open[depth - 1].made_by_children.push_back(made);
}

model::ThreadTrack replay_thread(uint32_t tid, std::vector<OpEvent>& events, uint64_t stop_monotonic_ns,
                                 const MonotonicToUnix& clock, std::vector<uint64_t>& stack_ids,
                                 uint64_t& unmatched_returns) {
  std::stable_sort(events.begin(), events.end(),
                   [](const OpEvent& a, const OpEvent& b) { return a.monotonic_ns < b.monotonic_ns; });
  model::ThreadTrack track;
  track.tid = tid;
  std::vector<OpenOp> open;
  for (OpEvent& event : events) {
    if (!event.is_exit) {
      open.push_back({event.op_id, track.spans.size(), event.sequence_counter, {}});
      model::OpSpan span;
      span.start_ns = clock.to_unix(event.monotonic_ns);
      span.operator_index = event.op_id;
      span.depth = static_cast<uint32_t>(open.size() - 1);
      span.arguments_recorded = event.has_arguments;
      span.inputs = std::move(event.arguments);
      span.sequence_number = event.sequence_number;
      span.forward_thread = event.forward_thread;
      track.spans.push_back(std::move(span));
      stack_ids.push_back(event.python_stack_id);
      continue;
    }
    auto match = std::find_if(open.rbegin(), open.rend(), [&](const OpenOp& op) { return op.op_id == event.op_id; });
    if (match == open.rend()) {
      ++unmatched_returns;
      continue;
    }
    const uint64_t end_ns = clock.to_unix(event.monotonic_ns);
    const size_t matched_depth = static_cast<size_t>(open.rend() - match) - 1;
    if (event.has_arguments) track.spans[open[matched_depth].span_index].outputs = std::move(event.arguments);
    attribute_created_node(open, matched_depth, event.sequence_counter, track);
    for (size_t depth = open.size(); depth-- > matched_depth;) {
      model::OpSpan& span = track.spans[open[depth].span_index];
      span.end_ns = end_ns;
      const bool own_exit = depth == matched_depth;
      span.unwound = own_exit && event.exit_cause == RANGE_EXIT_UNWOUND;
      span.return_missing = !own_exit || event.exit_cause == RANGE_EXIT_INFERRED;
    }
    open.resize(matched_depth);
  }
  const uint64_t stop_ns = clock.to_unix(stop_monotonic_ns);
  for (const OpenOp& op : open) {
    model::OpSpan& span = track.spans[op.span_index];
    span.end_ns = std::max(stop_ns, span.start_ns);
    span.closed_at_stop = true;
  }
  return track;
}

}  // namespace

BuiltThreads SpanBuilder::build(uint64_t stop_monotonic_ns, const MonotonicToUnix& clock) && {
  BuiltThreads built;
  std::vector<uint32_t> tids;
  for (const auto& [tid, events] : events_by_thread_) tids.push_back(tid);
  std::sort(tids.begin(), tids.end());
  for (uint32_t tid : tids) {
    auto& events = events_by_thread_[tid];
    built.span_stack_ids.emplace_back();
    built.threads.push_back(
        replay_thread(tid, events, stop_monotonic_ns, clock, built.span_stack_ids.back(), built.unmatched_returns));
    std::vector<OpEvent>().swap(events);  // release as we go: traces can be large
  }
  return built;
}

void assign_record_ids(model::Trace& trace) {
  struct Start {
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t* record_id;
  };
  std::vector<Start> starts;
  for (auto& annotation : trace.annotations) starts.push_back({annotation.start_ns, annotation.end_ns, &annotation.record_id});
  for (auto& thread : trace.threads)
    for (auto& span : thread.spans) starts.push_back({span.start_ns, span.end_ns, &span.record_id});
  // Equal starts: the longer (enclosing) range first. stable_sort keeps a thread's own
  // parent-before-child order for identical ranges.
  std::stable_sort(starts.begin(), starts.end(), [](const Start& a, const Start& b) {
    return std::tie(a.start_ns, b.end_ns) < std::tie(b.start_ns, a.end_ns);
  });
  uint64_t next_id = 1;
  for (const Start& start : starts) *start.record_id = next_id++;
}

}  // namespace tprof
