#include "userspace/session/recording_pipeline.h"

#include <algorithm>
#include <memory>

#include "python_stack.h"
#include "symbolizer/aten/flops.h"
#include "symbolizer/binary/process_memory.h"
#include "symbolizer/dynamo/recompile_reasons.h"
#include "userspace/assemble/torch_steps.h"
#include "userspace/loader/thread_bases.h"
#include "userspace/session/overhead_budget.h"
#include "userspace/session/run_report.h"

namespace tprof {
namespace {

// Strings the CUPTI library points tprof at: GPU names, and kernel names, which are C++ names
// (templates make them long).
constexpr size_t kMaxTargetStringBytes = 4096;

}  // namespace

RecordingPipeline::RecordingPipeline(AttachPlan& plan, const TargetProcess& target, TargetProbes& probes,
                                     SessionTracer& session, OutputFiles& outputs, MonotonicToUnix clock,
                                     const AttachOptions& options)
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

RecordingPipeline::~RecordingPipeline() { router_.forget(static_cast<uint32_t>(target_.pid()), decoder_); }

// HTA and Chakra need ProfilerStep annotations: ProfilerStep#0 opens with the window, and
// each Optimizer.step (any optimizer class) ends one iteration; without one, step 0 covers
// the whole window. The parts of iterations at the window's edges are no ProfilerStep: they
// would skew every per-step figure (TensorBoard's average step time was 4 times torch's).
void RecordingPipeline::begin(const model::SessionInfo& session, uint64_t window_start_ns) {
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

uint32_t RecordingPipeline::add_operator(model::Operator op) {
  operators_.push_back(std::move(op));
  return static_cast<uint32_t>(operators_.size() - 1);
}

void RecordingPipeline::advance(uint64_t watermark_ns) {
  if (stacks_) stacks_->resolve_pending();
  closer_.advance(watermark_ns);
  if (device_correlator_) device_correlator_->advance(watermark_ns);
}

model::RunSummary RecordingPipeline::finish(uint64_t stop_ns, const LossCounts& losses, const MonotonicToUnix& clock,
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

// From the traps the kernel counted and the programs' run time where they were measured, else
// from two traps a range.
model::ProbeCost RecordingPipeline::probe_cost(const TrapCosts& traps,
                                               const std::optional<OpTracer::ProgramStatistics>& programs,
                                               double moving_probes_ns, uint32_t sample_hz,
                                               uint64_t target_cpu_ns) const {
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

model::OpWindows RecordingPipeline::op_windows(const model::RunSummary& summary,
                                               const std::optional<model::OpWindows::StepCost>& step_cost) const {
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
model::RunSummary RecordingPipeline::summary_at(uint64_t window_end_unix_ns, const LossCounts& losses,
                                                std::optional<uint64_t> cycle_start_unix_ns) const {
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

void RecordingPipeline::report(Console& console, StopReason reason, const model::RunSummary& summary,
                               const LossCounts& losses) const {
  report_recording(console, reason, sinks_, closer_, decoder_, summary, losses, stacks_ ? &*stacks_ : nullptr,
                   summary_options_);
  if (argument_decoder_)
    if (const auto rejection = argument_decoder_->layout_rejection()) console.line("warning: " + *rejection);
  if (device_correlator_) report_device_activity(console, device_correlator_->counts(), losses);
  if (summary.probe_cost) report_probe_cost(console, *summary.probe_cost);
  if (summary.op_windows) report_op_windows(console, *summary.op_windows);
  if (summary.memory) report_memory(console, *summary.memory);
}

void RecordingPipeline::op_window_edge(OpWindowEdge edge, uint64_t monotonic_ns, std::pair<uint64_t, uint64_t> sites) {
  most_sites_linked_ = std::max(most_sites_linked_, sites.first);
  sites_attached_ = std::max(sites_attached_, sites.second);
  OpEvent event;
  event.monotonic_ns = monotonic_ns;
  event.window_edge = edge;
  event.optimizer_steps = static_cast<uint32_t>(probes_.optimizer_steps());
  closer_.add(0, std::move(event));
}

SpanCloser::StackLookup RecordingPipeline::stack_lookup(const AttachPlan& plan, const OpTracer& tracer) {
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
void RecordingPipeline::watch_recompile_reasons(const symbolizer::PythonLayout& layout, uint64_t code_address,
                                                const symbolizer::CodeInfo& code) {
  if (!symbolizer::is_dynamo_compile(code)) return;
  const symbolizer::ProcessMemory memory(target_.pid());
  const auto site = symbolizer::find_recompile_reason_site(
      layout, [&memory](uint64_t address, void* out, size_t size) { return memory.read(address, out, size); },
      code_address);
  if (site) probes_.set_recompile_reason_site(*site);
}

void RecordingPipeline::expect_device_activity(const MonotonicToUnix& clock) {
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

// --ops/--skip-ops/--no-view-ops for a boxed call: a regular expression is searched once per
// name, not once per call. The names are the target's registered operators; past the bound
// (names read from a torn or hostile record) they are searched each time.
bool RecordingPipeline::boxed_op_selected(std::string_view name) {
  static constexpr size_t kMaxNamesKept = 1 << 14;
  if (op_selection_.selects_all()) return true;
  if (const auto found = boxed_op_selection_.find(name); found != boxed_op_selection_.end()) return found->second;
  const bool selected = op_selection_.probes(name);
  if (boxed_op_selection_.size() < kMaxNamesKept) boxed_op_selection_.emplace(std::string(name), selected);
  return selected;
}

// Read when the decoder first sees the thread, while it most likely still exists.
std::string RecordingPipeline::thread_name(uint32_t tid) {
  const auto name = thread_names_.find(tid);
  return name != thread_names_.end() ? name->second : target_.thread_name(tid);
}

RecordDecoder::Callbacks RecordingPipeline::decoder_callbacks() {
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

}  // namespace tprof
