// The userspace half of one target's recording: its records from the session's ring buffer ->
// decoder -> span closer -> sinks, with the symbolizers the records need on the way (Python
// stacks, argument values, range names) and the end-of-run summary.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "model/trace_model.h"
#include "symbolizer/python/python_frame_resolver.h"
#include "userspace/assemble/device_correlator.h"
#include "userspace/assemble/python_stack_store.h"
#include "userspace/assemble/range_operators.h"
#include "userspace/assemble/span_closer.h"
#include "userspace/assemble/wall_clock.h"
#include "userspace/cli/console.h"
#include "userspace/cli/op_summary.h"
#include "userspace/ingest/argument_decoder.h"
#include "userspace/ingest/record_consumer.h"
#include "userspace/loader/op_tracer.h"
#include "userspace/loader/trap_calibration.h"
#include "userspace/session/attach_plan.h"
#include "userspace/session/op_selection.h"
#include "userspace/session/output_files.h"
#include "userspace/session/recording_loop.h"
#include "userspace/session/session_sinks.h"
#include "userspace/session/session_tracer.h"
#include "userspace/session/target_process.h"
#include "userspace/session/target_recording.h"

namespace tprof {

class RecordingPipeline {
 public:
  // Takes the plan's operators; routes the target's records to its decoder until destroyed.
  RecordingPipeline(AttachPlan& plan, const TargetProcess& target, TargetProbes& probes, SessionTracer& session,
                    OutputFiles& outputs, MonotonicToUnix clock, const AttachOptions& options);
  ~RecordingPipeline();
  RecordingPipeline(const RecordingPipeline&) = delete;
  RecordingPipeline& operator=(const RecordingPipeline&) = delete;

  // The trace begins, with the window opening at `window_start_ns` (monotonic).
  void begin(const model::SessionInfo& session, uint64_t window_start_ns);
  // A range found while recording (an inductor kernel): its operator index.
  uint32_t add_operator(model::Operator op);
  // Everything up to the watermark is final (SessionTracer::drain): it is closed, handed on and
  // written.
  void advance(uint64_t watermark_ns);
  // At most once a second, what was handed on so far reaches the partial files.
  void flush_if_due(uint64_t now_ns) { sinks_.flush_if_due(now_ns); }
  // Closes what is still open at `stop_ns`, ends and renames the files.
  // With `work.traps` (this machine's trap costs), the summary estimates what the probes cost
  // the target over `target_cpu_ns` of its CPU time (0: unknown): their traps, and the run time
  // of tprof's BPF programs where it was measured.
  model::RunSummary finish(uint64_t stop_ns, const LossCounts& losses, const MonotonicToUnix& clock,
                           const TargetRecording::ProbeWork& work, uint64_t target_cpu_ns);
  void report(Console& console, StopReason reason, const model::RunSummary& summary, const LossCounts& losses) const;

  // --schedule with repeat=R: every cycle is written, so recording can stop.
  bool schedule_done() const { return sinks_.schedule_done(); }
  uint64_t records() const { return decoder_.records(); }

  // GPU activity from the CUPTI library: linked to the ranges the closer hands on. From the
  // start, or from when CUDA loaded the library (at cuInit) into a recorded process.
  void expect_device_activity(const MonotonicToUnix& clock);

  // --max-overhead: the per-op probes went in (`sites.first` of the `sites.second` attached
  // linked) or out (all removed) at `monotonic_ns`.
  void op_window_edge(OpWindowEdge edge, uint64_t monotonic_ns, std::pair<uint64_t, uint64_t> sites = {});
  uint64_t exact_steps_ended() const { return closer_.counts().exact_steps_ended; }
  const std::unordered_set<uint64_t>& node_vtables() const { return decoder_.node_vtables(); }

 private:
  model::ProbeCost probe_cost(const TrapCosts& traps, const std::optional<OpTracer::ProgramStatistics>& programs,
                              double moving_probes_ns, uint32_t sample_hz, uint64_t target_cpu_ns) const;
  model::OpWindows op_windows(const model::RunSummary& summary,
                              const std::optional<model::OpWindows::StepCost>& step_cost = std::nullopt) const;
  model::RunSummary summary_at(uint64_t window_end_unix_ns, const LossCounts& losses,
                               std::optional<uint64_t> cycle_start_unix_ns = std::nullopt) const;
  SpanCloser::StackLookup stack_lookup(const AttachPlan& plan, const OpTracer& tracer);
  void watch_recompile_reasons(const symbolizer::PythonLayout& layout, uint64_t code_address,
                               const symbolizer::CodeInfo& code);
  bool boxed_op_selected(std::string_view name);
  std::string thread_name(uint32_t tid);
  RecordDecoder::Callbacks decoder_callbacks();

  const TargetProcess& target_;
  const TargetProbes& probes_;
  RecordRouter& router_;
  const SummaryOptions summary_options_;
  const std::string step_function_;  // --step-function; empty: steps end at Optimizer.step
  const std::optional<double> max_overhead_;  // --max-overhead
  // --ops, --skip-ops, --no-view-ops: also which ops called through torch.ops get a range. Those
  // pass one probed function whatever the op, so a left-out one still costs its traps.
  const OpSelection op_selection_;
  std::map<std::string, bool, std::less<>> boxed_op_selection_;  // by operator name
  std::optional<PythonFrameResolver> frame_resolver_;
  std::optional<PythonStackStore> stacks_;
  std::unordered_map<uint32_t, std::string> thread_names_;
  std::vector<model::Operator> operators_;
  std::optional<ArgumentDecoder> argument_decoder_;
  uint64_t most_sites_linked_ = 0;  // --max-overhead: by one window
  uint64_t sites_attached_ = 0;
  RangeOperators range_operators_;
  SessionSinks sinks_;
  SpanCloser closer_;
  std::optional<DeviceCorrelator> device_correlator_;
  RecordDecoder decoder_;
};

}  // namespace tprof
