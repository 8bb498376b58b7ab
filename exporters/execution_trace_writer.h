// Writes the model as a PyTorch Execution Trace, schema "1.1.1-chakra.0.0.4"
// (../shared/docs/formats.md §3): the nested node layout that torch's ExecutionTraceObserver
// writes and that PARAM et_replay and Chakra accept. Ops and annotations become nodes whose
// rf_id equals the Chrome trace's "Record function id", so the two files link (§1.1, §4).
#pragma once

#include "exporters/output_file.h"
#include "model/trace_model.h"

namespace tprof::exporters {

// The schema string written at the top of the file.
inline constexpr const char* kExecutionTraceSchema = "1.1.1-chakra.0.0.4";

// Streams one node per line, O(threads + nesting depth) memory however many ops. Node ids
// follow torch's habit of numbering at op enter: 1 is the process root, then a thread root
// at each thread's first use, then every op and annotation in global start order; nodes are
// written in id order with the process root last (it terminates the list, as in torch).
// Needs each ThreadTrack::spans and Trace::annotations sorted by start, parents first, as
// the model promises. The model has no tensor metadata yet, so every node's inputs and
// outputs are the empty form torch writes for its root nodes. Does not commit `out`.
void write_execution_trace(const model::Trace& trace, OutputFile& out);

}  // namespace tprof::exporters
