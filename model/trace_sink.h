// The interface between the recording pipeline and the exporters: the span closer hands each
// range on once it is final, and sinks write it out as it comes. A sink sees, in this order:
// begin; then thread, op, python_span, flow, memory, device_properties, device_activity and flush calls
// interleaved as recording goes (a thread is announced before any of its ranges); then finish.
// Ranges arrive as they close, so an enclosing range comes after what it encloses; sinks must
// not rely on start order.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/trace_model.h"

namespace tprof::model {

struct ThreadInfo {
  uint32_t tid = 0;
  std::string name;  // /proc/PID/task/TID/comm; "" if it could not be read
  // The thread's place in the global entry order, before any of its ranges: the Execution
  // Trace numbers its thread root node from it. Record ids and thread entry ids are one sequence.
  uint64_t entry_id = 0;
};

// An op, annotation or autograd range whose end is final.
struct ClosedOp {
  uint32_t tid = 0;
  const OpSpan& span;
  const Operator& op;
  const PythonStack* stack = nullptr;  // its Python call stack, innermost first; null: none
};

// The Chrome trace's arg of a compile's wait counter range: why dynamo compiled its frame again.
inline constexpr std::string_view kRecompileReasonArg = "Recompile reason";

// The recompile reason a compile's wait counter range carries (trace_model.h: OpSpan::outputs);
// null for any other range.
inline const std::string* recompile_reason(const ClosedOp& closed) {
  if (closed.op.kind != RangeKind::kWaitCounter || closed.span.outputs.size() != 1) return nullptr;
  const Value& reason = closed.span.outputs.front();
  return reason.kind == ValueKind::kString ? &reason.text : nullptr;
}

// Kineto's fwdbwd flow: from a forward op to the backward node that differentiates it.
struct ForwardBackwardFlow {
  uint64_t id = 0;  // from 1
  uint32_t forward_tid = 0;
  uint64_t forward_start_ns = 0;
  uint32_t backward_tid = 0;
  uint64_t backward_start_ns = 0;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void begin(const SessionInfo& session) = 0;
  virtual void thread(const ThreadInfo& thread) = 0;
  virtual void op(const ClosedOp& op) = 0;
  virtual void python_span(uint32_t tid, const PythonSpan& span) = 0;
  virtual void flow(const ForwardBackwardFlow& flow) = 0;
  // A GPU activity or CUDA API call, once what it links to is known (or never will be). Only
  // the Chrome trace shows them.
  virtual void device_activity(const DeviceActivity&) {}
  // --memory: a block allocated or freed, in time order, when it happens (before the ranges
  // around it close).
  virtual void memory(const MemoryEvent&) {}
  // A GPU's properties, before any of its activity; at most once per device.
  virtual void device_properties(const DeviceProperties&) {}
  // Make everything received so far durable enough to survive a kill of tprof.
  virtual void flush() {}
  virtual void finish(const RunSummary& summary) = 0;
};

// Hands every call to each of its sinks, in order.
class FanOutSink final : public TraceSink {
 public:
  explicit FanOutSink(std::vector<TraceSink*> sinks) : sinks_(std::move(sinks)) {}
  void begin(const SessionInfo& session) override {
    for (TraceSink* sink : sinks_) sink->begin(session);
  }
  void thread(const ThreadInfo& thread) override {
    for (TraceSink* sink : sinks_) sink->thread(thread);
  }
  void op(const ClosedOp& op) override {
    for (TraceSink* sink : sinks_) sink->op(op);
  }
  void python_span(uint32_t tid, const PythonSpan& span) override {
    for (TraceSink* sink : sinks_) sink->python_span(tid, span);
  }
  void flow(const ForwardBackwardFlow& flow) override {
    for (TraceSink* sink : sinks_) sink->flow(flow);
  }
  void device_activity(const DeviceActivity& activity) override {
    for (TraceSink* sink : sinks_) sink->device_activity(activity);
  }
  void device_properties(const DeviceProperties& device) override {
    for (TraceSink* sink : sinks_) sink->device_properties(device);
  }
  void memory(const MemoryEvent& event) override {
    for (TraceSink* sink : sinks_) sink->memory(event);
  }
  void flush() override {
    for (TraceSink* sink : sinks_) sink->flush();
  }
  void finish(const RunSummary& summary) override {
    for (TraceSink* sink : sinks_) sink->finish(summary);
  }

 private:
  std::vector<TraceSink*> sinks_;
};

// Replays a whole trace into a sink: its threads, then every range over all threads in end
// order (as the closer would hand them on), python spans likewise, flows, finish. For tests
// and offline tools.
void replay_trace(const Trace& trace, TraceSink& sink);

}  // namespace tprof::model
