// Puts what was recorded together into the model: op spans per thread with their Python
// stacks, the python_function timeline, thread names, the step annotation and record ids.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/trace_model.h"
#include "userspace/python_sample_log.h"
#include "userspace/python_stack_store.h"
#include "userspace/span_builder.h"
#include "userspace/wall_clock.h"

namespace tprof {

struct RecordedRun {
  uint32_t main_tid = 0;                    // the target's pid
  std::vector<model::Operator> operators;   // indexed by op id
  BuiltThreads ops;
  const PythonSampleLog* samples = nullptr;
  const PythonStackStore* stacks = nullptr;  // null without Python stacks
  std::unordered_map<uint32_t, std::string> thread_names;
};

model::Trace assemble_trace(RecordedRun&& run, const MonotonicToUnix& clock, model::TraceMetadata metadata);

}  // namespace tprof
