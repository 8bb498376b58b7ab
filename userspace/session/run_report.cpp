#include "userspace/session/run_report.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "python_stack.h"
#include "userspace/cli/console.h"
#include "userspace/cli/op_summary.h"

namespace tprof {
namespace {

std::string microseconds(double ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f us", ns / 1e3);
  return text;
}

// "the windows' steps took 412.0 us of CPU each, 101.3 us outside them: 1.40 s more; their traps
// 0.90 s; the larger counts".
std::string step_cost_text(const model::OpWindows::StepCost& cost) {
  const auto per_step = [](uint64_t cpu_ns, uint64_t steps) {
    return static_cast<double>(cpu_ns) / static_cast<double>(steps);
  };
  char text[96];
  std::snprintf(text, sizeof(text), ": %.2f s more; their traps %.2f s; the larger counts",
                std::max(cost.excess_inside_ns, 0.0) / 1e9, cost.estimated_inside_ns / 1e9);
  return "the windows' steps took " + microseconds(per_step(cost.cpu_inside_ns, cost.steps_inside)) +
         " of CPU each, " + microseconds(per_step(cost.cpu_outside_ns, cost.steps_outside)) + " outside them" + text;
}

// The peak's holders the console lists, and the frames it shows of each (innermost first).
constexpr size_t kPeakHoldersShown = 5;
constexpr size_t kFramesShown = 3;

// "aten::empty at train.py(88): step <- train.py(120): main".
std::string holder_place(const model::MemoryHolder& holder) {
  std::string text = holder.op.empty() ? "outside every op" : holder.op;
  for (size_t frame = 0; frame < std::min(holder.stack.size(), kFramesShown); ++frame)
    text += (frame == 0 ? " at " : " <- ") + model::frame_label(holder.stack[frame]);
  if (holder.stack.size() > kFramesShown) text += " <- ...";
  return text;
}

}  // namespace

void report_memory(Console& console, const model::MemorySummary& memory) {
  console.line("memory: " + group_thousands(memory.allocations) + " allocations and " +
               group_thousands(memory.frees) + " frees of CPU blocks; peak " +
               format_memory(memory.peak_allocated_bytes) + " allocated (of the blocks seen allocated since "
               "attaching), " + format_memory(memory.allocated_at_end) + " still allocated at the end");
  if (memory.frees_of_unknown_blocks > 0)
    console.line("memory: " + group_thousands(memory.frees_of_unknown_blocks) +
                 " frees of blocks allocated before tprof attached were left out, as torch leaves out those "
                 "from before profiling began");
  if (memory.blocks_forgotten > 0)
    console.line("warning: " + group_thousands(memory.blocks_forgotten) +
                 " allocations were left out, with their frees: tprof's map of live blocks was full");
  if (memory.peak_holders.empty()) return;
  console.line("blocks live at the peak, by where they were allocated (largest first):");
  for (size_t i = 0; i < std::min(memory.peak_holders.size(), kPeakHoldersShown); ++i) {
    const model::MemoryHolder& holder = memory.peak_holders[i];
    console.line("  " + format_memory(holder.bytes) + " in " + group_thousands(holder.blocks) + " blocks: " +
                 holder_place(holder));
  }
}

// "probes: 17,100 traps (7,800 at entries x 0.9 us, 8,900 at rets x 13.0 us, 400 stepped x 15.4
// us; trap costs measured in tprof's process) + 31 ms in tprof's BPF programs = about 150 ms of
// the target's 210 ms of CPU (71.4%)"; without the kernel's counts, from the ranges:
// "probes: 5,720 ranges x 14.0 us (a trap at entry 0.9 us, ...) = about 79 ms ...".
void report_probe_cost(Console& console, const model::ProbeCost& cost) {
  std::string line;
  if (const auto& measured = cost.measured) {
    line = "probes: " + group_thousands(measured->entry_traps + measured->return_traps + measured->stepped_traps) +
           " traps (" + group_thousands(measured->entry_traps) + " at entries x " + microseconds(cost.emulated_entry_ns) +
           ", " + group_thousands(measured->return_traps) + " at rets x " + microseconds(cost.return_ns) + ", " +
           group_thousands(measured->stepped_traps) + " stepped x " + microseconds(cost.stepped_entry_ns) +
           "; trap costs measured in tprof's process) + " + group_thousands(measured->bpf_run_ns / 1'000'000) +
           " ms in tprof's BPF programs";
    if (cost.sampling_ns > 0)
      line += " + " + group_thousands(static_cast<uint64_t>(cost.sampling_ns / 1e6)) + " ms of stack-sample interrupts (" +
              microseconds(cost.interrupt_ns) + " each)";
    if (measured->moving_probes_ns > 0)
      line += " + " + group_thousands(measured->moving_probes_ns / 1'000'000) + " ms of tprof's CPU putting them in and out";
  } else {
    line = "probes: " + group_thousands(cost.ranges) + " ranges x " + microseconds(cost.emulated_entry_ns + cost.return_ns) +
           " (a trap at entry " + microseconds(cost.emulated_entry_ns) + ", " + microseconds(cost.stepped_entry_ns) +
           " where the kernel single-steps it, at ret " + microseconds(cost.return_ns) + ", measured in tprof's process)";
  }
  line += " = about " + group_thousands(static_cast<uint64_t>(cost.estimate_ns / 1e6)) + " ms";
  if (cost.target_cpu_ns > 0) {
    char share[48];
    std::snprintf(share, sizeof(share), " (%.1f%%)", 100.0 * cost.estimate_ns / static_cast<double>(cost.target_cpu_ns));
    line += " of the target's " + group_thousands(cost.target_cpu_ns / 1'000'000) + " ms of CPU" + share;
  }
  console.line(line);
}

void report_op_windows(Console& console, const model::OpWindows& windows) {
  char text[64];
  std::snprintf(text, sizeof(text), "%g%%", 100.0 * windows.max_slowdown);
  std::string line = std::string("ops in windows (--max-overhead ") + text + "): " + group_thousands(windows.windows) +
                     (windows.windows == 1 ? " window" : " windows");
  if (windows.sites_attached > 0)
    line += " (at most " + group_thousands(windows.most_sites_linked) + " of " +
            group_thousands(windows.sites_attached) + " probe sites linked: the ops called so far)";
  line += ", ";
  line += windows.steps_seen == 0
              ? "each a ProfilerStep (no Optimizer.step seen)"
              : group_thousands(windows.exact_steps) + " exact ProfilerSteps of " + group_thousands(windows.steps_seen) +
                    " steps";
  if (windows.estimated_slowdown) {
    std::snprintf(text, sizeof(text), "; estimated slowdown %.1f%%", 100.0 * *windows.estimated_slowdown);
    line += text;
  }
  if (const auto& cost = windows.step_cost) line += " (" + step_cost_text(*cost) + ")";
  console.line(line);
}

void report_device_activity(Console& console, const DeviceCorrelator::Counts& counts, const LossCounts& losses) {
  console.line("GPU: " + group_thousands(counts.kernels) + " kernels, " + group_thousands(counts.copies) +
               " copies and memsets, " + group_thousands(counts.syncs) + " syncs, " + group_thousands(counts.api_calls) +
               " CUDA API calls (" + group_thousands(counts.api_calls_in_ops) + " inside an op; " +
               group_thousands(counts.api_calls_hidden) + " more left out, as torch.profiler leaves them out); " +
               group_thousands(counts.linked) + " GPU activities linked to their launch; properties of " +
               group_thousands(counts.devices) + (counts.devices == 1 ? " GPU" : " GPUs"));
  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CUPTI takes one subscriber, and Kineto keeps it.
  constexpr int32_t kAnotherCuptiClient = 39;
  if (counts.refusal == kAnotherCuptiClient)
    console.line("warning: no GPU timing: the target's own torch.profiler (Kineto) holds CUPTI, and tprof leaves "
                 "it to it");
  else if (counts.refusal != 0)
    console.line("warning: no GPU timing: CUPTI refused (CUptiResult " + std::to_string(counts.refusal) + ")");
  if (counts.handed_over_ns != 0)
    console.line("warning: GPU rows end where the target's own torch.profiler started: tprof handed CUPTI over to it, "
                 "with everything recorded until then");
  if (counts.untimed > 0)
    console.line("warning: " + group_thousands(counts.untimed) +
                 " GPU activity records were still unfinished (no GPU time) when CUPTI was last flushed, and were left "
                 "out");
  if (counts.dropped_by_cupti > 0)
    console.line("warning: CUPTI dropped " + group_thousands(counts.dropped_by_cupti) +
                 " GPU activity records for want of buffer space; the GPU rows miss them");
  if (counts.api_calls_without_thread > 0)
    console.line("warning: " + group_thousands(counts.api_calls_without_thread) +
                 " CUDA API calls came from threads that had exited before tprof could name them, and were left out");
  if (losses.device_activity_unreadable > 0)
    console.line("warning: " + group_thousands(losses.device_activity_unreadable) +
                 " GPU activity records could not be read from the target");
}

void report_python_losses(Console& console, const model::RunSummary& summary, const LossCounts& losses,
                          const PythonStackStore& stacks) {
  if (summary.ops_without_python_stack > 0)
    console.line("warning: " + group_thousands(summary.ops_without_python_stack) +
                 " ops have no Python stack; the causes follow (ops of threads that never ran Python, such as "
                 "torch's own worker threads, have none)");
  if (losses.thread_state_not_found > 0)
    console.line("warning: " + group_thousands(losses.thread_state_not_found) +
                 " stack walks found no Python thread state of their thread in the interpreter's thread list "
                 "(a thread without Python, or one starting or ending)");
  if (losses.thread_search_cut > 0)
    console.line("warning: " + group_thousands(losses.thread_search_cut) + " stack walks gave up after " +
                 std::to_string(PYTHON_MAX_THREAD_STATES) +
                 " thread states: the target has more Python threads than tprof searches, and those past it "
                 "have no Python stacks");
  if (losses.stack_unreadable > 0)
    console.line("warning: " + group_thousands(losses.stack_unreadable) + " stack walks had no memory for their buffer");
  if (losses.stack_not_stored > 0)
    console.line("warning: " + group_thousands(losses.stack_not_stored) +
                 " walked stacks found no room in the BPF stack map");
  if (summary.python_stacks_not_copied > 0)
    console.line("warning: " + group_thousands(summary.python_stacks_not_copied) +
                 " ops and samples named a stack tprof could not copy: " + group_thousands(stacks.evicted()) +
                 " times it had left the BPF stack map (its ring-buffer record had been dropped), " +
                 group_thousands(stacks.over_bound()) + " times tprof held its bound of " +
                 group_thousands(PythonStackStore::kMaxStacks) + " distinct stacks");
  if (summary.python_stacks_unresolved > 0)
    console.line("warning: " + group_thousands(summary.python_stacks_unresolved) +
                 " distinct stacks show no frames: none of their code objects could be read");
}

void report_recording(Console& console, StopReason reason, const SessionSinks& sinks, const SpanCloser& closer,
                      const RecordDecoder& decoder, const model::RunSummary& summary, const LossCounts& losses,
                      const PythonStackStore* stacks, const SummaryOptions& summary_options) {
  const SpanCloser::Counts& counts = closer.counts();
  console.line(std::string("stopped: ") + describe(reason) + ". Wrote " + sinks.written());
  const std::string partial = counts.partial_steps > 0 ? ", " + group_thousands(counts.partial_steps) + " partial" : "";
  console.line(group_thousands(counts.ops) + " ranges (" + group_thousands(counts.steps) + " ProfilerSteps" + partial +
               ") and " +
               group_thousands(counts.python_spans) +
               " python_function spans on " + std::to_string(counts.threads) + " threads from " +
               group_thousands(decoder.records()) + " events; " + group_thousands(summary.dropped_records) +
               " events dropped; " + group_thousands(summary.unmatched_returns) +
               " returns of calls that began before attach (ignored)");
  if (stacks) {
    console.line(group_thousands(summary.python_samples) + " stack samples; " +
                 group_thousands(summary.ops_without_python_stack) + " ops without a Python stack");
    report_python_losses(console, summary, losses, *stacks);
  }
  if (decoder.malformed_records() > 0)
    console.line("warning: " + group_thousands(decoder.malformed_records()) +
                 " records of an unknown shape were ignored (tprof and its BPF object disagree?)");
  if (summary.boxed_calls_unnamed > 0)
    console.line(group_thousands(summary.boxed_calls_unnamed) +
                 " calls through torch.ops had no c10 operator name (JIT-only operators, such as torch.ops.prim.*, "
                 "which torch's profiler does not record either): no ranges");
  if (summary.late_records > 0)
    console.line("warning: " + group_thousands(summary.late_records) +
                 " records arrived later than the 50 ms skew bound and may nest wrongly");
  if (summary.python_timeline_lost > 0)
    console.line("warning: " + group_thousands(summary.python_timeline_lost) +
                 " stack observations were left out of python_function spans (a thread's backlog reached its bound)");
  if (losses.ranges_not_tracked > 0)
    console.line("warning: " + group_thousands(losses.ranges_not_tracked) +
                 " calls nested deeper than tprof tracks (64 open ops per thread) end with their caller, "
                 "flagged 'tprof: return missing'");
  if (summary.dropped_records > 0)
    console.line("warning: the ring buffer overflowed and events were lost; retry with a larger --buffer-mb");
  if (sinks.unknown_values().total() > 0) console.line("warning: " + sinks.unknown_values().describe());
  if (sinks.memory_timeline_left_out() > 0)
    console.line("warning: the memory timeline stops at its bound (" +
                 group_thousands(exporters::MemoryCategories::kMaxEvents) + " events, " +
                 group_thousands(exporters::MemoryCategories::kMaxNodes) + " ops): " +
                 group_thousands(sinks.memory_timeline_left_out()) + " later events and ops are not in it");
  const uint64_t unmatched_continuations = decoder.unmatched_list_elements() + decoder.unmatched_more_arguments();
  if (unmatched_continuations > 0)
    console.line("warning: " + group_thousands(unmatched_continuations) +
                 " records of list elements or further arguments found no op entry of theirs (lost before them)");
  console.summary_table(format_summary_table(sinks.totals().table(), summary_options));
  for (const std::string& line : sinks.compile_summary().describe()) console.line(line);
}

}  // namespace tprof
