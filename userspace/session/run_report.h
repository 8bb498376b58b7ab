// What the console says of a finished recording: why it stopped and what it wrote, what it
// counted and lost, its totals and torch.compile summary, what the probes cost the target, the
// GPU side, memory, and why Python stacks went missing.
#pragma once

#include "model/trace_model.h"
#include "userspace/assemble/device_correlator.h"
#include "userspace/assemble/python_stack_store.h"
#include "userspace/assemble/span_closer.h"
#include "userspace/cli/console.h"
#include "userspace/cli/op_summary.h"
#include "userspace/ingest/record_consumer.h"
#include "userspace/loader/op_tracer.h"
#include "userspace/session/recording_loop.h"
#include "userspace/session/session_sinks.h"

namespace tprof {

// The end of one target's recording: the stop and the files, the counts and every loss, the
// summary table and the torch.compile summary (`stacks`: null without Python stacks).
void report_recording(Console& console, StopReason reason, const SessionSinks& sinks, const SpanCloser& closer,
                      const RecordDecoder& decoder, const model::RunSummary& summary, const LossCounts& losses,
                      const PythonStackStore* stacks, const SummaryOptions& summary_options);
void report_probe_cost(Console& console, const model::ProbeCost& cost);
// --max-overhead: "ops in windows (--max-overhead 5%): 12 windows, 11 exact ProfilerSteps of
// 540 steps; estimated slowdown 4.6%".
void report_op_windows(Console& console, const model::OpWindows& windows);
// --memory: the allocations and frees recorded, the peak, and the largest of the groups of
// blocks live at it, by where they were allocated.
void report_memory(Console& console, const model::MemorySummary& memory);
void report_device_activity(Console& console, const DeviceCorrelator::Counts& counts, const LossCounts& losses);
// Why stacks went missing, a line per cause: a walk that failed or a stack that was lost must
// never pass unsaid (ops without a stack look just like ops of a thread without Python).
void report_python_losses(Console& console, const model::RunSummary& summary, const LossCounts& losses,
                          const PythonStackStore& stacks);

}  // namespace tprof
