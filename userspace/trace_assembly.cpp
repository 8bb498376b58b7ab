#include "userspace/trace_assembly.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "userspace/forward_backward_links.h"
#include "userspace/python_timeline.h"

namespace tprof {
namespace {

model::PythonStack to_model_stack(const ResolvedStack& stack) {
  model::PythonStack frames;
  frames.reserve(stack.size());
  for (const ResolvedFrame& frame : stack) frames.push_back({frame.file, frame.line, frame.function});
  return frames;
}

// Every thread that recorded anything, the main thread (which carries the step annotation)
// first, then by tid; each with its op spans and the stack id of each op.
struct ThreadRecording {
  model::ThreadTrack track;
  std::vector<uint64_t> span_stack_ids;
};

std::vector<ThreadRecording> collect_threads(RecordedRun& run) {
  std::map<uint32_t, ThreadRecording> by_tid;
  for (size_t i = 0; i < run.ops.threads.size(); ++i) {
    ThreadRecording& thread = by_tid[run.ops.threads[i].tid];
    thread.track = std::move(run.ops.threads[i]);
    thread.span_stack_ids = std::move(run.ops.span_stack_ids[i]);
  }
  if (run.samples)
    for (const auto& [tid, samples] : run.samples->by_thread()) by_tid[tid].track.tid = tid;
  by_tid[run.main_tid].track.tid = run.main_tid;

  std::vector<ThreadRecording> threads;
  threads.push_back(std::move(by_tid[run.main_tid]));
  for (auto& [tid, thread] : by_tid)
    if (tid != run.main_tid) threads.push_back(std::move(thread));
  return threads;
}

// Op entries and samples of one thread, in the order build_frame_spans wants.
std::vector<StackObservation> observations_of(const ThreadRecording& thread, const PythonSampleLog* samples,
                                              const PythonStackStore& stacks, const MonotonicToUnix& clock) {
  std::vector<StackObservation> observations;
  for (size_t i = 0; i < thread.track.spans.size(); ++i) {
    if (const ResolvedStack* stack = stacks.find(thread.span_stack_ids[i]))
      observations.push_back({thread.track.spans[i].start_ns, thread.track.spans[i].end_ns, stack, true});
  }
  if (samples) {
    auto found = samples->by_thread().find(thread.track.tid);
    if (found != samples->by_thread().end())
      for (const PythonSample& sample : found->second)
        if (const ResolvedStack* stack = stacks.find(sample.stack_id)) {
          const uint64_t at = clock.to_unix(sample.monotonic_ns);
          observations.push_back({at, at, stack, false});
        }
  }
  // By start; at equal start ops before samples, and an enclosing op before what it calls.
  std::stable_sort(observations.begin(), observations.end(), [](const StackObservation& a, const StackObservation& b) {
    return std::make_tuple(a.start_ns, !a.is_op, b.end_ns) < std::make_tuple(b.start_ns, !b.is_op, a.end_ns);
  });
  return observations;
}

}  // namespace

model::Trace assemble_trace(RecordedRun&& run, const MonotonicToUnix& clock, model::TraceMetadata metadata) {
  model::Trace trace;
  trace.metadata = std::move(metadata);
  trace.metadata.unmatched_returns = run.ops.unmatched_returns;
  trace.operators = std::move(run.operators);
  std::vector<ThreadRecording> threads = collect_threads(run);

  std::vector<std::vector<FrameSpan>> frame_spans;
  std::unordered_map<uint64_t, int32_t> stack_index_by_id;
  for (ThreadRecording& thread : threads) {
    auto name = run.thread_names.find(thread.track.tid);
    if (name != run.thread_names.end()) thread.track.name = name->second;
    if (!run.stacks) continue;
    for (size_t i = 0; i < thread.track.spans.size(); ++i) {
      const uint64_t stack_id = thread.span_stack_ids[i];
      const ResolvedStack* stack = run.stacks->find(stack_id);
      if (!stack) continue;
      auto [entry, inserted] = stack_index_by_id.emplace(stack_id, static_cast<int32_t>(trace.python_stacks.size()));
      if (inserted) trace.python_stacks.push_back(to_model_stack(*stack));
      thread.track.spans[i].python_stack = entry->second;
    }
    frame_spans.push_back(build_frame_spans(observations_of(thread, run.samples, *run.stacks, clock)));
  }
  for (ThreadRecording& thread : threads) trace.threads.push_back(std::move(thread.track));
  if (run.stacks) name_python_spans(frame_spans, trace);

  // Until step detection exists, one step covers the whole window: HTA and Chakra need a
  // ProfilerStep annotation.
  trace.annotations.push_back(model::Annotation{"ProfilerStep#0", run.main_tid, trace.metadata.window_start_unix_ns,
                                                trace.metadata.window_end_unix_ns, 0});
  assign_record_ids(trace);
  link_forward_backward(trace);
  return trace;
}

}  // namespace tprof
