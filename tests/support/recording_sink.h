// A TraceSink that keeps everything it is handed, in arrival order, for tests to inspect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/trace_model.h"
#include "model/trace_sink.h"

namespace tprof::test {

class RecordingSink final : public model::TraceSink {
 public:
  struct Op {
    uint32_t tid;
    model::OpSpan span;
    std::string name;
    std::vector<model::PythonFrame> stack;  // empty: none
  };
  struct PythonSpan {
    uint32_t tid;
    model::PythonSpan span;
  };

  void begin(const model::SessionInfo& info) override {
    session = info;
    ++begins;
  }
  void thread(const model::ThreadInfo& info) override { threads.push_back(info); }
  void op(const model::ClosedOp& closed) override {
    ops.push_back({closed.tid, closed.span, closed.op.name, closed.stack ? *closed.stack : model::PythonStack{}});
  }
  void python_span(uint32_t tid, const model::PythonSpan& span) override { python_spans.push_back({tid, span}); }
  void flow(const model::ForwardBackwardFlow& flow) override { flows.push_back(flow); }
  void device_activity(const model::DeviceActivity& activity) override { device_activities.push_back(activity); }
  void device_properties(const model::DeviceProperties& device) override { devices.push_back(device); }
  void memory(const model::MemoryEvent& event) override { memory_events.push_back(event); }
  void flush() override { ++flushes; }
  void finish(const model::RunSummary& run) override {
    summary = run;
    ++finishes;
  }

  // The ops of one thread, in the order they were handed on.
  std::vector<Op> ops_of(uint32_t tid) const {
    std::vector<Op> of_thread;
    for (const Op& op : ops)
      if (op.tid == tid) of_thread.push_back(op);
    return of_thread;
  }

  model::SessionInfo session;
  model::RunSummary summary;
  std::vector<model::ThreadInfo> threads;
  std::vector<Op> ops;
  std::vector<PythonSpan> python_spans;
  std::vector<model::ForwardBackwardFlow> flows;
  std::vector<model::DeviceActivity> device_activities;
  std::vector<model::DeviceProperties> devices;
  std::vector<model::MemoryEvent> memory_events;
  int begins = 0;
  int flushes = 0;
  int finishes = 0;
};

}  // namespace tprof::test
