#include "userspace/session/target_recording.h"

#include <algorithm>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "exporters/output_file.h"
#include "model/trace_model.h"
#include "model/trace_sink.h"
#include "python_stack.h"
#include "symbolizer/aten/op_call_guards.h"
#include "symbolizer/aten/flops.h"
#include "symbolizer/binary/process_memory.h"
#include "symbolizer/dynamo/recompile_reasons.h"
#include "symbolizer/python/python_runtime.h"
#include "userspace/ingest/argument_decoder.h"
#include "userspace/cli/console.h"
#include "userspace/cli/error.h"
#include "userspace/loader/thread_bases.h"
#include "userspace/loader/trap_calibration.h"
#include "userspace/loader/exit_probes.h"
#include "userspace/loader/op_tracer.h"
#include "userspace/session/overhead_budget.h"
#include "userspace/session/privileges.h"
#include "userspace/loader/probe_plan.h"
#include "userspace/ingest/record_consumer.h"
#include "symbolizer/python/python_frame_resolver.h"
#include "userspace/assemble/python_stack_store.h"
#include "userspace/loader/python_walker_config.h"
#include "userspace/assemble/range_operators.h"
#include "userspace/loader/range_probes.h"
#include "userspace/session/recording_loop.h"
#include "userspace/session/run_report.h"
#include "userspace/assemble/device_correlator.h"
#include "userspace/assemble/span_closer.h"
#include "userspace/assemble/torch_steps.h"
#include "userspace/session/stop_signals.h"
#include "userspace/session/output_files.h"
#include "userspace/session/target_process.h"
#include "userspace/session/torch_library_plan.h"
#include "userspace/cli/op_summary.h"
#include "userspace/session/session_sinks.h"
#include "userspace/loader/unique_fd.h"
#include "userspace/session/attach_plan.h"
#include "userspace/session/attach_timings.h"
#include "userspace/session/compiled_kernel_watch.h"
#include "userspace/assemble/wall_clock.h"

#ifndef TPROF_VERSION
#error "TPROF_VERSION must be defined by the build"
#endif

namespace tprof {
namespace {

std::string describe_attachment(const TargetProcess& target, const std::optional<OpProbes>& ops,
                                const std::optional<ExitProbes>& exits,
                                const std::optional<symbolizer::PythonLayout>& python, uint32_t sample_hz,
                                const AttachTimings& timings) {
  std::string text = "attached to " + std::to_string(target.pid()) + " (" + target.name() + "): ";
  if (ops) text += std::to_string(ops->plan.sites.offsets.size()) + " op sites in " + ops->library.path_in_target;
  if (ops && ops->selected.left_out > 0)
    text += " (" + std::to_string(ops->selected.left_out) + " ops left out by " + ops->left_out_by + ")";
  if (exits) text += " (" + std::to_string(exits->returns.offsets.size()) + " return sites)";
  if (ops && ops->tensor_layout) text += " with shapes";
  if (ops && python) text += ", ";
  if (python)
    text += "Python " + python->version.to_string() + " stacks (" +
            (sample_hz > 0 ? "sampler " + std::to_string(sample_hz) + " Hz" : std::string("no sampler")) + ")";
  return text + " in " + timings.describe();
}

TargetOptions probe_options_for(const TargetProcess& target, const std::optional<OpProbes>& ops,
                                const std::optional<RangeProbes>& ranges,
                                const std::optional<symbolizer::PythonLayout>& python) {
  TargetOptions options;
  options.pid = target.pid();
  if (ranges) {
    options.node_sequence_nr_offset = ranges->node_sequence_nr_offset();
    options.node_thread_id_offset = ranges->node_thread_id_offset();
    if (const auto& counter = ranges->sequence_counter()) {
      options.sequence_counter_tls_index = counter->tls_index_address;
      options.sequence_counter_field_offset = counter->field_offset;
    }
  }
  if (python) options.python = make_walker_config(*python);
  if (ops && ops->tensor_layout) options.tensors = ops->tensor_layout->to_bpf();
  return options;
}

model::SessionInfo session_info(const TargetProcess& target, const std::optional<OpProbes>& ops,
                                const std::optional<symbolizer::PythonLayout>& python) {
  model::SessionInfo session;
  session.pid = static_cast<uint32_t>(target.pid());
  session.namespace_pid = static_cast<uint32_t>(target.namespace_pid());
  session.rank = rank_of(target);
  if (const auto world_size = target.environment_variable("WORLD_SIZE");
      session.rank >= 0 && world_size && !world_size->empty() &&
      world_size->find_first_not_of("0123456789") == std::string::npos)
    session.world_size = std::stoll(*world_size);
  session.process_name = target.name();
  session.hostname = host_name();
  session.tprof_version = TPROF_VERSION;
  if (ops) session.torch_library = ops->library.path_in_target;
  if (ops && ops->tensor_layout) session.tensor_layout = ops->tensor_layout->source;
  if (python) session.python_version = python->version.to_string();
  return session;
}

// Strings the CUPTI library points tprof at: GPU names, and kernel names, which are C++ names
// (templates make them long).
constexpr size_t kMaxTargetStringBytes = 4096;

// Inside a catch: a target that exited while tprof read it or put its probes in fails with
// whatever was met first (a vanished /proc/PID/maps, libbpf's "No such file or directory"); say
// what happened instead, and drop what planning warned of it (held till then): a process that
// is gone maps nothing. Anything else is rethrown as it was, after those warnings.
[[noreturn]] void rethrow_saying_if_exited(const TargetProcess& target, Console& console) {
  if (!target.has_exited()) {
    console.release_lines();
    throw;
  }
  console.discard_lines();
  throw Error("pid " + std::to_string(target.pid()) + " exited before tprof was attached: nothing was recorded");
}

// The userspace half of a recording: its records from the session's ring buffer -> decoder ->
// span closer -> sinks, with the symbolizers the records need on the way (Python stacks,
// argument values, range names).
class RecordingPipeline {
 public:
  RecordingPipeline(AttachPlan& plan, const TargetProcess& target, TargetProbes& probes, SessionTracer& session,
                    OutputFiles& outputs, MonotonicToUnix clock, const AttachOptions& options)
      : target_(target),
        probes_(probes),
        router_(session.router()),
        summary_options_(options.summary),
        step_function_(options.step_function),
        max_overhead_(options.max_overhead),
        op_selection_(options.op_selection),
        operators_(plan.ops ? std::move(plan.ops->plan.operators) : std::vector<model::Operator>{}),
        range_operators_(operators_,
                         [range_probes = plan.range_probes ? &*plan.range_probes : nullptr](uint64_t vptr) {
                           return range_probes ? range_probes->node_name(vptr) : std::string();
                         }),
        sinks_(outputs, options, target,
               [this](uint64_t cycle_start_unix_ns, uint64_t cycle_end_unix_ns) {
                 return summary_at(cycle_end_unix_ns, probes_.losses(), cycle_start_unix_ns);
               }),
        closer_(operators_, stack_lookup(plan, session.tracer()), clock,
                [this](uint32_t tid) { return thread_name(tid); }, sinks_.sink()),
        decoder_(closer_, decoder_callbacks()) {
    if (plan.ops && plan.ops->tensor_layout)
      argument_decoder_.emplace(*plan.ops->tensor_layout, std::move(plan.ops->argument_plans),
                                plan.ops->undefined_tensor_impl);
    if (plan.cupti_library) expect_device_activity(clock);
    if (plan.memory) closer_.track_memory();
    router_.route(static_cast<uint32_t>(target.pid()), decoder_);
  }

  ~RecordingPipeline() { router_.forget(static_cast<uint32_t>(target_.pid()), decoder_); }
  RecordingPipeline(const RecordingPipeline&) = delete;
  RecordingPipeline& operator=(const RecordingPipeline&) = delete;

  // HTA and Chakra need ProfilerStep annotations: ProfilerStep#0 opens with the window, and
  // each Optimizer.step (any optimizer class) ends one iteration; without one, step 0 covers
  // the whole window. The parts of iterations at the window's edges are no ProfilerStep: they
  // would skew every per-step figure (TensorBoard's average step time was 4 times torch's).
  void begin(const model::SessionInfo& session, uint64_t window_start_ns) {
    sinks_.sink().begin(session);
    closer_.detect_steps(torch_step_detection(
        step_function_, [this](std::string_view name) { return range_operators_.annotation(name); }));
    if (max_overhead_)
      closer_.record_ops_in_windows(session.pid);
    else
      closer_.open_step(session.pid, range_operators_.annotation("ProfilerStep#0"), window_start_ns);
    closer_.thread_running_since(session.pid, window_start_ns);
    closer_.estimate_flops([](const model::Operator& op, const std::vector<model::Value>& inputs) {
      return symbolizer::estimate_flops(op.name, inputs).value_or(0);
    });
  }

  // A range found while recording (an inductor kernel): its operator index.
  uint32_t add_operator(model::Operator op) {
    operators_.push_back(std::move(op));
    return static_cast<uint32_t>(operators_.size() - 1);
  }

  // Everything up to the watermark is final (SessionTracer::drain): it is closed, handed on and
  // written.
  void advance(uint64_t watermark_ns) {
    if (stacks_) stacks_->resolve_pending();
    closer_.advance(watermark_ns);
    if (device_correlator_) device_correlator_->advance(watermark_ns);
  }

  // At most once a second, what was handed on so far reaches the partial files.
  void flush_if_due(uint64_t now_ns) { sinks_.flush_if_due(now_ns); }

  // Closes what is still open at `stop_ns`, ends and renames the files.
  // With `work.traps` (this machine's trap costs), the summary estimates what the probes cost
  // the target over `target_cpu_ns` of its CPU time (0: unknown): their traps, and the run time
  // of tprof's BPF programs where it was measured.
  model::RunSummary finish(uint64_t stop_ns, const LossCounts& losses, const MonotonicToUnix& clock,
                           const TargetRecording::ProbeWork& work, uint64_t target_cpu_ns) {
    closer_.finish(stop_ns);
    if (device_correlator_) device_correlator_->finish();
    model::RunSummary summary = summary_at(clock.to_unix(stop_ns), losses);
    if (work.traps)
      summary.probe_cost = probe_cost(*work.traps, work.programs, work.moving_probes_ns, work.sample_hz, target_cpu_ns);
    if (max_overhead_) summary.op_windows = op_windows(summary, work.step_cost);  // with the estimate now
    sinks_.sink().finish(summary);
    sinks_.commit();
    return summary;
  }

  // --schedule with repeat=R: every cycle is written, so recording can stop.
  bool schedule_done() const { return sinks_.schedule_done(); }

  // From the traps the kernel counted and the programs' run time where they were measured, else
  // from two traps a range.
  model::ProbeCost probe_cost(const TrapCosts& traps, const std::optional<OpTracer::ProgramStatistics>& programs,
                              double moving_probes_ns, uint32_t sample_hz, uint64_t target_cpu_ns) const {
    model::ProbeCost cost{.emulated_entry_ns = traps.emulated_entry_ns,
                          .stepped_entry_ns = traps.stepped_entry_ns,
                          .return_ns = traps.return_ns,
                          .interrupt_ns = traps.interrupt_ns,
                          .sampling_ns = traps.sampling_ns(target_cpu_ns, sample_hz),
                          .ranges = closer_.counts().ops,
                          .measured = std::nullopt,
                          .estimate_ns = traps.estimate_ns(closer_.counts().ops),
                          .target_cpu_ns = target_cpu_ns};
    if (!programs) return cost;
    cost.measured = model::ProbeCost::Measured{.entry_traps = programs->entry_traps,
                                               .return_traps = programs->return_traps,
                                               .stepped_traps = programs->stepped_traps,
                                               .bpf_run_ns = programs->run_time_ns,
                                               .moving_probes_ns = static_cast<uint64_t>(moving_probes_ns)};
    cost.estimate_ns = traps.estimate_ns(*programs) + moving_probes_ns + cost.sampling_ns;
    return cost;
  }

  model::OpWindows op_windows(const model::RunSummary& summary,
                              const std::optional<model::OpWindows::StepCost>& step_cost = std::nullopt) const {
    const SpanCloser::Counts& counts = closer_.counts();
    model::OpWindows windows{.max_slowdown = *max_overhead_,
                             .windows = counts.op_windows,
                             .most_sites_linked = most_sites_linked_,
                             .sites_attached = sites_attached_,
                             .exact_steps = counts.steps,
                             .steps_seen = probes_.optimizer_steps(),
                             .step_cost = step_cost,
                             .estimated_slowdown = std::nullopt};
    if (!summary.probe_cost || summary.probe_cost->target_cpu_ns == 0) return windows;
    const double cost_ns = step_cost ? step_cost->cost_ns() : summary.probe_cost->estimate_ns;
    windows.estimated_slowdown = OverheadBudget::slowdown(cost_ns, summary.probe_cost->target_cpu_ns);
    return windows;
  }

  // The end-of-run facts as they stand now; for a --schedule cycle begun at `cycle_start_unix_ns`,
  // with the memory earlier cycles left live.
  model::RunSummary summary_at(uint64_t window_end_unix_ns, const LossCounts& losses,
                               std::optional<uint64_t> cycle_start_unix_ns = std::nullopt) const {
    model::RunSummary summary;
    summary.window_end_unix_ns = window_end_unix_ns;
    summary.dropped_records = losses.ring_buffer_full;
    summary.unmatched_returns = closer_.counts().unmatched_returns;
    summary.late_records = closer_.counts().late_records;
    summary.python_samples = decoder_.python_samples();
    const SpanCloser::Counts& counts = closer_.counts();
    summary.python_thread_states_not_found = losses.thread_state_not_found + losses.thread_search_cut;
    summary.python_thread_search_cut = losses.thread_search_cut;
    summary.python_stacks_not_copied = counts.stacks_not_copied;
    summary.python_stacks_lost = summary.python_thread_states_not_found + losses.stack_unreadable +
                                 losses.stack_not_stored + counts.stacks_not_copied;
    summary.ops_without_python_stack = counts.ops_without_python_stack;
    summary.python_stacks_unresolved = stacks_ ? stacks_->unresolved() : 0;
    summary.arguments_lost = losses.arguments_unreadable;
    summary.python_timeline_lost = closer_.counts().python_timeline_lost;
    if (device_correlator_) summary.device_records_dropped = device_correlator_->counts().dropped_by_cupti;
    summary.boxed_calls_unnamed = range_operators_.unnamed_boxed_calls();
    if (max_overhead_) summary.op_windows = op_windows(summary);  // so far: a --schedule cycle's too
    summary.memory = closer_.memory_summary(cycle_start_unix_ns);
    return summary;
  }

  void report(Console& console, StopReason reason, const model::RunSummary& summary, const LossCounts& losses) const {
    report_recording(console, reason, sinks_, closer_, decoder_, summary, losses, stacks_ ? &*stacks_ : nullptr,
                     summary_options_);
    if (argument_decoder_)
      if (const auto rejection = argument_decoder_->layout_rejection()) console.line("warning: " + *rejection);
    if (device_correlator_) report_device_activity(console, device_correlator_->counts(), losses);
    if (summary.probe_cost) report_probe_cost(console, *summary.probe_cost);
    if (summary.op_windows) report_op_windows(console, *summary.op_windows);
    if (summary.memory) report_memory(console, *summary.memory);
  }

  uint64_t records() const { return decoder_.records(); }

  // --max-overhead: the per-op probes went in (`sites.first` of the `sites.second` attached
  // linked) or out (all removed) at `monotonic_ns`.
  void op_window_edge(OpWindowEdge edge, uint64_t monotonic_ns, std::pair<uint64_t, uint64_t> sites = {}) {
    most_sites_linked_ = std::max(most_sites_linked_, sites.first);
    sites_attached_ = std::max(sites_attached_, sites.second);
    OpEvent event;
    event.monotonic_ns = monotonic_ns;
    event.window_edge = edge;
    event.optimizer_steps = static_cast<uint32_t>(probes_.optimizer_steps());
    closer_.add(0, std::move(event));
  }
  uint64_t exact_steps_ended() const { return closer_.counts().exact_steps_ended; }
  const std::unordered_set<uint64_t>& node_vtables() const { return decoder_.node_vtables(); }

 private:
  SpanCloser::StackLookup stack_lookup(const AttachPlan& plan, const OpTracer& tracer) {
    if (!plan.python) return {};
    frame_resolver_.emplace(*plan.python, target_.pid(),
                            [this, layout = *plan.python](uint64_t code_address, const symbolizer::CodeInfo& code) {
                              watch_recompile_reasons(layout, code_address, code);
                            });
    stacks_.emplace(tracer.python_stacks_fd(), [this](const python_stack& raw) { return frame_resolver_->resolve(raw); });
    return [this](uint64_t stack_id) { return stacks_->find(stack_id); };
  }

  // dynamo's `_compile`, first seen in a compile's stack: from then on its compiles' wait
  // counters carry why they compiled again (a first compile has no reason to miss).
  void watch_recompile_reasons(const symbolizer::PythonLayout& layout, uint64_t code_address,
                               const symbolizer::CodeInfo& code) {
    if (!symbolizer::is_dynamo_compile(code)) return;
    const symbolizer::ProcessMemory memory(target_.pid());
    const auto site = symbolizer::find_recompile_reason_site(
        layout, [&memory](uint64_t address, void* out, size_t size) { return memory.read(address, out, size); },
        code_address);
    if (site) probes_.set_recompile_reason_site(*site);
  }

  // GPU activity from the CUPTI library: linked to the ranges the closer hands on. From the
  // start, or from when CUDA loaded the library (at cuInit) into a recorded process.
 public:
  void expect_device_activity(const MonotonicToUnix& clock) {
    if (device_correlator_) return;
    device_correlator_.emplace(
        clock,
        DeviceCorrelator::Callbacks{
            .open_range = [this](uint32_t tid, uint64_t unix_ns) { return closer_.innermost_open_range(tid, unix_ns); },
            .target_string =
                [memory = symbolizer::ProcessMemory(target_.pid())](uint64_t address) {
                  return memory.read_string(address, kMaxTargetStringBytes).value_or("");
                },
            .os_thread = [threads = std::make_shared<CuptiThreadNames>(target_.pid())](uint32_t cupti_thread) {
              return threads->os_thread(cupti_thread);
            }},
        sinks_.sink());
    closer_.on_range_closed([this](uint32_t tid, const model::OpSpan& span) { device_correlator_->range_closed(tid, span); });
  }

 private:

  // --ops/--skip-ops/--no-view-ops for a boxed call: a regular expression is searched once per
  // name, not once per call. The names are the target's registered operators; past the bound
  // (names read from a torn or hostile record) they are searched each time.
  bool boxed_op_selected(std::string_view name) {
    static constexpr size_t kMaxNamesKept = 1 << 14;
    if (op_selection_.selects_all()) return true;
    if (const auto found = boxed_op_selection_.find(name); found != boxed_op_selection_.end()) return found->second;
    const bool selected = op_selection_.probes(name);
    if (boxed_op_selection_.size() < kMaxNamesKept) boxed_op_selection_.emplace(std::string(name), selected);
    return selected;
  }

  // Read when the decoder first sees the thread, while it most likely still exists.
  std::string thread_name(uint32_t tid) {
    const auto name = thread_names_.find(tid);
    return name != thread_names_.end() ? name->second : target_.thread_name(tid);
  }

  RecordDecoder::Callbacks decoder_callbacks() {
    return {.on_new_thread = [this](uint32_t tid) { thread_names_.emplace(tid, target_.thread_name(tid)); },
            .on_stack_id =
                [this](uint64_t stack_id) {
                  if (stacks_) stacks_->note(stack_id);
                },
            .decode_arguments = [this](uint32_t op_id, bool returns,
                                       const op_arguments& arguments) -> std::vector<model::Value> {
              if (!argument_decoder_) return {};
              return argument_decoder_->decode(op_id, returns, arguments);
            },
            .annotation_operator = [this](std::string_view name,
                                          model::RangeKind kind) { return range_operators_.annotation(name, kind); },
            .boxed_operator = [this](std::string_view name,
                                     std::optional<std::string_view> overload) -> std::optional<uint32_t> {
              if (!boxed_op_selected(name)) return std::nullopt;
              return range_operators_.boxed_op(name, overload);
            },
            .node_operator = [this](uint64_t vptr, model::RangeKind kind) { return range_operators_.node(vptr, kind); },
            .on_device_activity =
                [this](const device_activity& activity) {
                  if (device_correlator_) device_correlator_->add(activity);
                },
            .on_python_stack =
                [this](uint64_t stack_id, const python_stack& stack) {
                  if (stacks_) stacks_->add(stack_id, stack);
                },
            .complete_arguments =
                [this](uint32_t op_id, const spilled_arguments& spilled, std::vector<model::Value>& inputs) {
                  if (argument_decoder_) argument_decoder_->complete(op_id, spilled, inputs);
                },
            .append_list_elements = [this](const list_elements& elements, std::vector<model::Value>& values) {
              return argument_decoder_ && argument_decoder_->append_list_elements(elements, values);
            },
            .complete_more_arguments =
                [this](uint32_t op_id, const op_arguments& arguments, std::vector<model::Value>& inputs) {
                  if (argument_decoder_) argument_decoder_->complete_more(op_id, arguments, inputs);
                }};
  }

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

}  // namespace

// What a recording holds from planning to the written files; RecordingPipeline and AttachPlan
// stay private to this file.
struct TargetRecording::State {
  State(const AttachOptions& options, pid_t pid, SessionTracer& session, TorchLibraryPlans& library_plans,
        const MonotonicToUnix& clock, Console& console)
      : options(options),
        console(console),
        session(session),
        clock(clock),
        target(pid),
        plan(checked_plan(this->options, target, library_plans, console)) {}

  // The privileges and kernel are checked before anything is read from the target.
  static AttachPlan checked_plan(const AttachOptions& options, const TargetProcess& target,
                                 TorchLibraryPlans& library_plans, Console& console) {
    require_tracing_privileges(target.uid());
    require_uprobe_multi_kernel();
    try {
      return plan_attach(options, target, library_plans, console);
    } catch (const std::exception&) {
      rethrow_saying_if_exited(target, console);
    }
  }

  AttachOptions options;
  Console& console;
  SessionTracer& session;
  MonotonicToUnix clock;
  TargetProcess target;
  AttachPlan plan;
  std::optional<OutputFiles> outputs;
  std::unique_ptr<TargetProbes> probes;
  std::unique_ptr<RecordingPipeline> pipeline;
  std::optional<CompiledKernelWatch> kernel_watch;  // where torch is mapped
  uint64_t attach_start_ns = 0;  // monotonic: when attaching began, and when every probe was live
  uint64_t attached_ns = 0;
  AttachTimings timings;
  uint64_t stop_ns = 0;          // monotonic: when the window closed
  // The target's CPU time when the window opened and when last read (at most twice a second,
  // and as the window closes), for the estimate of what the probes cost it.
  std::optional<uint64_t> cpu_at_begin_ns;
  std::optional<uint64_t> cpu_latest_ns;
  uint64_t cpu_read_ns = 0;
  // --max-overhead: each op's first-call guard (link-time; symbolizer/aten/op_call_guards.h),
  // found while planning, and the windows opened.
  std::optional<std::vector<uint64_t>> op_call_guards;
  uint64_t windows_opened = 0;
  bool said_guards_unreadable = false;
};

// What planning tells of the target waits until its probes are in (attach()): a target that
// exits meanwhile gets one line saying so, not the warnings its vanished mappings gave.
TargetRecording::TargetRecording(const AttachOptions& options, pid_t pid, SessionTracer& session,
                                 TorchLibraryPlans& library_plans, const MonotonicToUnix& clock, Console& console) {
  const uint64_t planning_ns = monotonic_now_ns();
  console.hold_lines();
  try {
    state_ = std::make_unique<State>(options, pid, session, library_plans, clock, console);
    state_->timings.since_ns = options.started_ns != 0 ? options.started_ns : planning_ns;
    state_->timings.planning_ns = planning_ns;
    prepare();
  } catch (...) {
    console.release_lines();
    throw;
  }
}

void TargetRecording::prepare() {
  State& s = *state_;
  s.outputs.emplace(s.options, s.target);  // fails now, not after recording
  try {
    plan_range_probes(s.plan, s.target, s.console);
    if (s.options.max_overhead && s.plan.ops) s.op_call_guards = find_op_call_guards(*s.plan.ops);
  } catch (const std::exception&) {
    rethrow_saying_if_exited(s.target, s.console);
  }
  s.timings.loading_ns = monotonic_now_ns();
  s.probes = s.session.tracer().add_target(probe_options_for(s.target, s.plan.ops, s.plan.range_probes, s.plan.python));
  s.timings.loaded_ns = monotonic_now_ns();
  if (s.options.max_overhead) s.probes->keep_op_probes_for_windows();
  if (s.plan.ops) s.timings.library_plan = s.plan.ops->plan_source;
  if (s.plan.ops && s.plan.ops->tensor_layout)
    for (uint32_t op_id = 0; op_id < s.plan.ops->argument_plans.size(); ++op_id)
      s.probes->set_op_plan(op_id, s.plan.ops->argument_plans[op_id].bpf);
  s.pipeline = std::make_unique<RecordingPipeline>(s.plan, s.target, *s.probes, s.session, *s.outputs, s.clock,
                                                   s.options);
  if (s.plan.ops)
    s.kernel_watch.emplace(s.target, *s.probes,
                           [pipeline = s.pipeline.get()](model::Operator op) { return pipeline->add_operator(std::move(op)); },
                           s.console);
}

// A recording given up before its attach (another target failed) still says what it found.
TargetRecording::~TargetRecording() {
  if (state_) state_->console.release_lines();
}

void TargetRecording::attach() {
  State& s = *state_;
  s.attach_start_ns = monotonic_now_ns();
  try {
    attach_probes(*s.probes, s.session.tracer(), s.plan, sample_hz());
    if (s.kernel_watch) s.kernel_watch->start();
  } catch (const std::exception&) {
    rethrow_saying_if_exited(s.target, s.console);
  }
  s.console.release_lines();
  s.attached_ns = monotonic_now_ns();
  s.timings.linking_ns = s.attach_start_ns;
  s.timings.linked_ns = s.attached_ns;
}

void TargetRecording::begin(uint64_t base_time_unix_ns, std::optional<uint64_t> window_start) {
  State& s = *state_;
  const uint64_t window_start_ns = window_start.value_or(s.attach_start_ns);
  start_recording(*s.probes, s.plan, s.console);
  if (s.kernel_watch) s.kernel_watch->look();  // what the target loaded since attach(), uncounted
  model::SessionInfo session = session_info(s.target, s.plan.ops, s.plan.python);
  session.window_start_unix_ns = s.clock.to_unix(window_start_ns);
  session.attach_unix_ns = s.clock.to_unix(std::max(s.attached_ns, window_start_ns));
  session.base_time_unix_ns = base_time_unix_ns != 0 ? base_time_unix_ns : session.window_start_unix_ns;
  session.gpu = s.plan.gpu;
  s.cpu_at_begin_ns = s.target.cpu_time_ns();
  s.console.line(describe_attachment(s.target, s.plan.ops, s.plan.exits, s.plan.python, sample_hz(),
                                     s.timings));
  s.pipeline->begin(session, window_start_ns);
}

void TargetRecording::start(uint64_t base_time_unix_ns) {
  attach();
  begin(base_time_unix_ns, std::nullopt);
}

const TargetProcess& TargetRecording::target() const { return state_->target; }

void TargetRecording::advance(uint64_t watermark_ns) { state_->pipeline->advance(watermark_ns); }

void TargetRecording::flush_if_due(uint64_t now_ns) {
  State& s = *state_;
  s.pipeline->flush_if_due(now_ns);
  if (s.kernel_watch && s.stop_ns == 0) s.kernel_watch->look_if_due(now_ns);
  constexpr uint64_t kCpuReadPeriodNs = 500'000'000;
  if (now_ns - s.cpu_read_ns < kCpuReadPeriodNs) return;
  s.cpu_read_ns = now_ns;
  if (const auto cpu = s.target.cpu_time_ns()) s.cpu_latest_ns = cpu;
}

uint64_t TargetRecording::records() const { return state_->pipeline->records(); }

std::optional<uint64_t> TargetRecording::cpu_in_window_ns() {
  State& s = *state_;
  if (s.stop_ns == 0)
    if (const auto cpu = s.target.cpu_time_ns()) s.cpu_latest_ns = cpu;  // the window is still open: read it now
  if (!s.cpu_at_begin_ns || !s.cpu_latest_ns || *s.cpu_latest_ns < *s.cpu_at_begin_ns) return std::nullopt;
  return *s.cpu_latest_ns - *s.cpu_at_begin_ns;
}

bool TargetRecording::schedule_done() const { return state_->pipeline->schedule_done(); }

uint64_t TargetRecording::dropped() const { return state_->probes->losses().ring_buffer_full; }

void TargetRecording::attach_device_activity() {
  State& s = *state_;
  if (s.plan.cupti_library) return;
  s.plan.cupti_library = s.target.find_mapped_library(kCuptiLibraryPrefix);
  if (!s.plan.cupti_library) return;
  try {
    s.probes->attach_device_activity(s.plan.cupti_library->host_path);
  } catch (const Error& error) {
    s.console.line(std::string("warning: GPU timing unavailable: ") + error.what());
    s.plan.cupti_library.reset();
    return;
  }
  s.probes->detach_api_calls();
  s.pipeline->expect_device_activity(s.clock);
  s.console.line("GPU timing from CUDA's initialization on: CUPTI activity through " +
                 s.plan.cupti_library->path_in_target + " (CUDA API calls from CUPTI from then on, not uprobes)");
}

// A window is timed from after the last probe is in to before the first goes: what the probes
// record while going in or out is partial, and dropped.
void TargetRecording::open_op_window() {
  State& s = *state_;
  const symbolizer::ProcessMemory memory(s.target.pid());
  bool unreadable = false;
  const std::vector<bool> called =
      s.op_call_guards
          ? symbolizer::read_called_ops(memory, s.plan.ops->library.load_address, *s.op_call_guards, &unreadable)
          : std::vector<bool>{};
  if (unreadable && !std::exchange(s.said_guards_unreadable, true))
    s.console.line(
        errno_message("warning: cannot read which ops the target has called; windows probe every op", errno));
  const TargetProbes::WindowSites sites =
      sites_called_so_far(s.plan, called, s.windows_opened == 0, s.pipeline->node_vtables(), memory);
  ++s.windows_opened;
  const uint64_t linked = s.probes->link_op_probes(sites);
  s.pipeline->op_window_edge(OpWindowEdge::kOpened, monotonic_now_ns(), {linked, s.probes->op_probe_sites()});
}

void TargetRecording::close_op_window() {
  State& s = *state_;
  s.pipeline->op_window_edge(OpWindowEdge::kClosing, monotonic_now_ns());
  s.probes->unlink_op_probes();
}

// --max-overhead writes no python_function spans (see SpanCloser::record_ops_in_windows), the
// sampler's only use, and its interrupts cost ~33 us each on the test VM.
uint32_t TargetRecording::sample_hz() const {
  return state_->plan.python && !state_->options.max_overhead ? state_->options.sample_hz : 0;
}

uint64_t TargetRecording::optimizer_steps() const { return state_->probes->optimizer_steps(); }

bool TargetRecording::op_window_open() const { return state_->probes->op_probes_linked(); }

uint64_t TargetRecording::exact_steps_ended() const { return state_->pipeline->exact_steps_ended(); }

void TargetRecording::detach() {
  State& s = *state_;
  s.probes->stop_recording();
  // The window ends here: removing the probes takes a while (see TargetProbes::detach) and
  // records nothing more.
  s.stop_ns = monotonic_now_ns();
  if (const auto cpu = s.target.cpu_time_ns()) s.cpu_latest_ns = cpu;
  s.probes->detach();
}

void TargetRecording::finish(StopReason reason, const ProbeWork& work) {
  State& s = *state_;
  const LossCounts losses = s.probes->losses();
  const uint64_t target_cpu_ns = cpu_in_window_ns().value_or(0);
  const model::RunSummary summary = s.pipeline->finish(s.stop_ns, losses, s.clock, work, target_cpu_ns);
  s.pipeline->report(s.console, reason, summary, losses);
}

}  // namespace tprof
