#include "userspace/session/target_recording.h"

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "symbolizer/aten/op_call_guards.h"
#include "symbolizer/binary/process_memory.h"
#include "symbolizer/python/python_runtime.h"
#include "userspace/assemble/wall_clock.h"
#include "userspace/cli/console.h"
#include "userspace/cli/error.h"
#include "userspace/loader/python_walker_config.h"
#include "userspace/loader/uprobe_multi.h"
#include "userspace/session/attach_plan.h"
#include "userspace/session/attach_timings.h"
#include "userspace/session/compiled_kernel_watch.h"
#include "userspace/session/output_files.h"
#include "userspace/session/privileges.h"
#include "userspace/session/recording_pipeline.h"
#include "userspace/session/target_process.h"

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

}  // namespace

// What a recording holds from planning to the written files, kept out of target_recording.h so
// that its users need not see the plan, the probes or the pipeline.
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
    s.kernel_watch.emplace(s.target, *s.probes, s.options.op_selection,
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

bool TargetRecording::look_for_compiled_kernels() {
  State& s = *state_;
  if (!s.kernel_watch || s.stop_ns != 0 || !s.plan.has_dynamo) return false;
  try {
    s.kernel_watch->look();
  } catch (const std::exception&) {
    return false;  // its mappings could not be read: it is exiting
  }
  return true;
}

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
