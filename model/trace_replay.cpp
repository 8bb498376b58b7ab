#include <algorithm>
#include <tuple>

#include "model/trace_model.h"
#include "model/trace_sink.h"

namespace tprof::model {
namespace {

// Where a range sits: thread and index.
struct RangeAt {
  size_t thread;
  size_t index;
};

// Every range of `ranges_of(thread)` over all threads in the order a streaming closer hands
// them on: by end; ranges that end together outermost first (by start, then a thread's parent
// before its child, which precedes it in start order).
template <typename RangesOf>
std::vector<RangeAt> end_order(const Trace& trace, RangesOf ranges_of) {
  std::vector<RangeAt> order;
  for (size_t thread = 0; thread < trace.threads.size(); ++thread)
    for (size_t index = 0; index < ranges_of(trace.threads[thread]).size(); ++index) order.push_back({thread, index});
  auto range = [&](const RangeAt& at) -> const auto& { return ranges_of(trace.threads[at.thread])[at.index]; };
  std::stable_sort(order.begin(), order.end(), [&](const RangeAt& a, const RangeAt& b) {
    return std::tie(range(a).end_ns, range(a).start_ns, a.index) < std::tie(range(b).end_ns, range(b).start_ns, b.index);
  });
  return order;
}

}  // namespace

void replay_trace(const Trace& trace, TraceSink& sink) {
  sink.begin(trace.session);
  for (const ThreadTrack& thread : trace.threads) sink.thread({thread.tid, thread.name, thread.entry_id});
  for (const RangeAt& at : end_order(trace, [](const ThreadTrack& thread) -> const auto& { return thread.spans; })) {
    const ThreadTrack& thread = trace.threads[at.thread];
    const OpSpan& span = thread.spans[at.index];
    const PythonStack* stack =
        span.python_stack >= 0 ? &trace.python_stacks.at(static_cast<size_t>(span.python_stack)) : nullptr;
    sink.op({thread.tid, span, trace.operators.at(span.operator_index), stack});
  }
  for (const RangeAt& at : end_order(trace, [](const ThreadTrack& thread) -> const auto& { return thread.python_spans; }))
    sink.python_span(trace.threads[at.thread].tid, trace.threads[at.thread].python_spans[at.index]);
  uint64_t flow_id = 1;
  for (const ForwardBackwardLink& link : trace.forward_backward_links) {
    const ThreadTrack& forward = trace.threads.at(link.forward_thread_index);
    const ThreadTrack& backward = trace.threads.at(link.backward_thread_index);
    sink.flow({flow_id++, forward.tid, forward.spans.at(link.forward_span_index).start_ns, backward.tid,
               backward.spans.at(link.backward_span_index).start_ns});
  }
  sink.finish(trace.summary);
}

void number_entries(Trace& trace) {
  struct Entry {
    uint64_t start_ns;
    uint64_t end_ns;
    size_t thread;
    uint64_t* id;
  };
  std::vector<Entry> entries;
  for (size_t thread = 0; thread < trace.threads.size(); ++thread)
    for (OpSpan& span : trace.threads[thread].spans) entries.push_back({span.start_ns, span.end_ns, thread, &span.record_id});
  // Equal starts: the longer (enclosing) range first; stable_sort keeps a thread's own
  // parent-before-child order for identical ranges.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.start_ns, b.end_ns) < std::tie(b.start_ns, a.end_ns);
  });
  std::vector<bool> announced(trace.threads.size(), false);
  uint64_t next_id = 1;
  for (const Entry& entry : entries) {
    if (!announced[entry.thread]) {
      announced[entry.thread] = true;
      trace.threads[entry.thread].entry_id = next_id++;
    }
    *entry.id = next_id++;
  }
  for (size_t t = 0; t < trace.threads.size(); ++t)
    if (!announced[t]) trace.threads[t].entry_id = next_id++;
  // Each range's parent: the innermost earlier range of its thread that encloses it.
  for (ThreadTrack& thread : trace.threads) {
    std::vector<const OpSpan*> open;
    for (OpSpan& span : thread.spans) {
      while (!open.empty() && !(open.back()->start_ns <= span.start_ns && span.end_ns <= open.back()->end_ns))
        open.pop_back();
      span.parent_record_id = open.empty() ? 0 : open.back()->record_id;
      open.push_back(&span);
    }
  }
}

}  // namespace tprof::model
