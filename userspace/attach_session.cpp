#include "userspace/attach_session.h"

#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unordered_map>

#include "exporters/chrome_trace_writer.h"
#include "exporters/output_file.h"
#include "model/trace_model.h"
#include "symbolizer/op_catalog.h"
#include "userspace/console.h"
#include "userspace/error.h"
#include "userspace/op_summary.h"
#include "userspace/op_tracer.h"
#include "userspace/privileges.h"
#include "userspace/probe_plan.h"
#include "userspace/record_consumer.h"
#include "userspace/span_builder.h"
#include "userspace/stop_signals.h"
#include "userspace/target_process.h"
#include "userspace/unique_fd.h"
#include "userspace/wall_clock.h"

#ifndef TPROF_VERSION
#error "TPROF_VERSION must be defined by the build"
#endif

namespace tprof {
namespace {

constexpr long kDrainPeriodMs = 20;
constexpr uint64_t kStatusPeriodNs = 250'000'000;
constexpr const char* kTorchLibraryPrefix = "libtorch_cpu.so";

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

std::string default_output_path(pid_t pid, uint64_t unix_ns) {
  // torch.profiler.tensorboard_trace_handler's "<worker>.<span>.pt.trace.json".
  return host_name() + "_" + std::to_string(pid) + "." + std::to_string(unix_ns) + ".pt.trace.json";
}

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

UniqueFd periodic_timer(long period_ms) {
  UniqueFd fd(::timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK));
  if (!fd) throw Error(errno_message("timerfd_create", errno));
  itimerspec spec{};
  spec.it_interval.tv_nsec = period_ms * 1'000'000;
  spec.it_value = spec.it_interval;
  if (::timerfd_settime(fd.get(), 0, &spec, nullptr) != 0) throw Error(errno_message("timerfd_settime", errno));
  return fd;
}

enum class StopReason { kDuration, kSignal, kTargetExited, kFault };

const char* describe(StopReason reason) {
  switch (reason) {
    case StopReason::kDuration: return "duration elapsed";
    case StopReason::kSignal: return "interrupted";
    case StopReason::kTargetExited: return "target exited";
    case StopReason::kFault: return "recording failed";
  }
  return "";
}

// Waits on the stop sources and drains the ring buffer every kDrainPeriodMs.
class RecordingLoop {
 public:
  RecordingLoop(const TargetProcess& target, const UniqueFd& stop_signals, RecordConsumer& consumer,
                const OpTracer& tracer, Console& console)
      : target_(target), stop_signals_(stop_signals), consumer_(consumer), tracer_(tracer), console_(console),
        drain_timer_(periodic_timer(kDrainPeriodMs)), epoll_(::epoll_create1(EPOLL_CLOEXEC)) {
    if (!epoll_) throw Error(errno_message("epoll_create1", errno));
    watch(stop_signals_.get());
    watch(target_.exit_notifier().get());
    watch(drain_timer_.get());
  }

  StopReason run(std::optional<double> duration_s) {
    const uint64_t start_ns = monotonic_now_ns();
    const uint64_t duration_ns = duration_s ? static_cast<uint64_t>(*duration_s * 1e9) : UINT64_MAX;
    uint64_t last_status_ns = 0;
    for (;;) {
      epoll_event ready[3];
      const int count = ::epoll_wait(epoll_.get(), ready, 3, -1);
      if (count < 0) {
        if (errno == EINTR) continue;
        throw Error(errno_message("epoll_wait", errno));
      }
      for (int i = 0; i < count; ++i) {
        const int fd = ready[i].data.fd;
        if (fd == stop_signals_.get()) return StopReason::kSignal;
        if (fd == target_.exit_notifier().get()) return StopReason::kTargetExited;
        uint64_t expirations = 0;
        (void)!::read(drain_timer_.get(), &expirations, sizeof(expirations));
      }
      consumer_.drain();
      const uint64_t now_ns = monotonic_now_ns();
      if (now_ns - start_ns >= duration_ns) return StopReason::kDuration;
      if (now_ns - last_status_ns >= kStatusPeriodNs) {
        console_.status(static_cast<double>(now_ns - start_ns) / 1e9, consumer_.records(), tracer_.dropped_records());
        last_status_ns = now_ns;
      }
    }
  }

 private:
  void watch(int fd) {
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0) throw Error(errno_message("epoll_ctl", errno));
  }

  const TargetProcess& target_;
  const UniqueFd& stop_signals_;
  RecordConsumer& consumer_;
  const OpTracer& tracer_;
  Console& console_;
  UniqueFd drain_timer_;
  UniqueFd epoll_;
};

model::Trace assemble_trace(const TargetProcess& target, ProbePlan&& plan, BuiltThreads&& built,
                            std::unordered_map<uint32_t, std::string>&& thread_names, model::TraceMetadata metadata) {
  model::Trace trace;
  trace.metadata = std::move(metadata);
  trace.metadata.unmatched_returns = built.unmatched_returns;
  trace.operators = std::move(plan.operators);
  trace.threads = std::move(built.threads);
  const uint32_t main_tid = static_cast<uint32_t>(target.pid());
  if (std::none_of(trace.threads.begin(), trace.threads.end(),
                   [&](const model::ThreadTrack& thread) { return thread.tid == main_tid; }))
    trace.threads.push_back(model::ThreadTrack{main_tid, {}, {}});
  // Main thread first (it carries the step annotation), then by tid.
  std::sort(trace.threads.begin(), trace.threads.end(), [&](const auto& a, const auto& b) {
    return (a.tid == main_tid) != (b.tid == main_tid) ? a.tid == main_tid : a.tid < b.tid;
  });
  for (model::ThreadTrack& thread : trace.threads) {
    auto name = thread_names.find(thread.tid);
    thread.name = name != thread_names.end() ? name->second : target.thread_name(thread.tid);
  }
  // Until step detection exists, one step covers the whole window, as HTA and Chakra need a
  // ProfilerStep annotation to exist.
  trace.annotations.push_back(model::Annotation{"ProfilerStep#0", main_tid, trace.metadata.window_start_unix_ns,
                                                trace.metadata.window_end_unix_ns, 0});
  assign_record_ids(trace);
  return trace;
}

}  // namespace

int run_attach(const AttachOptions& options) {
  Console console(options.quiet);
  TargetProcess target(options.pid);
  require_tracing_privileges(target.uid());
  require_uprobe_multi_kernel();
  const auto torch_library = target.find_mapped_library(kTorchLibraryPrefix);
  if (!torch_library)
    throw Error("process " + std::to_string(target.pid()) + " (" + target.name() +
                ") has not loaded libtorch_cpu: is it a PyTorch process, and has it imported torch yet?");

  const std::string output_path =
      options.output_path.empty() ? default_output_path(target.pid(), unix_now_ns()) : options.output_path;
  exporters::OutputFile output(output_path);  // fails now, not after recording, if unwritable

  const symbolizer::OpCatalog catalog = symbolizer::build_op_catalog(torch_library->host_path);
  if (catalog.unresolved_count > 0)
    console.line(std::to_string(catalog.unresolved_count) +
                 " ops have no schema in the library; their names are derived from their symbols");
  ProbePlan plan = plan_op_probes(catalog, torch_library->host_path);

  OpTracer tracer(options.ring_buffer_bytes);
  const UniqueFd stop_signals = block_stop_signals();
  const MonotonicToUnix clock = MonotonicToUnix::calibrate();

  model::TraceMetadata metadata;
  metadata.pid = static_cast<uint32_t>(target.pid());
  metadata.process_name = target.name();
  metadata.hostname = host_name();
  metadata.tprof_version = TPROF_VERSION;
  metadata.torch_library = torch_library->path_in_target;

  SpanBuilder spans;
  std::unordered_map<uint32_t, std::string> thread_names;
  RecordConsumer consumer(tracer.ring_buffer_fd(), spans,
                          [&](uint32_t tid) { thread_names.emplace(tid, target.thread_name(tid)); });

  const uint64_t attach_start_ns = monotonic_now_ns();
  metadata.window_start_unix_ns = clock.to_unix(attach_start_ns);
  tracer.attach(target.pid(), plan.sites);
  const uint64_t attached_ns = monotonic_now_ns();
  metadata.attach_unix_ns = clock.to_unix(attached_ns);
  char attach_ms[32];
  std::snprintf(attach_ms, sizeof(attach_ms), "%.1f", static_cast<double>(attached_ns - attach_start_ns) / 1e6);
  console.line("attached to " + std::to_string(target.pid()) + " (" + target.name() + "): " +
               std::to_string(plan.sites.offsets.size()) + " op sites in " + torch_library->path_in_target +
               " in " + attach_ms + " ms");

  StopReason reason;
  std::string fault;
  try {
    reason = RecordingLoop(target, stop_signals, consumer, tracer, console).run(options.duration_s);
  } catch (const Error& error) {
    reason = StopReason::kFault;
    fault = error.what();
  }
  tracer.detach();
  try {
    consumer.drain();
  } catch (const Error& error) {
    if (fault.empty()) fault = error.what();
    reason = StopReason::kFault;
  }
  const uint64_t stop_ns = monotonic_now_ns();
  console.clear_status();
  metadata.window_end_unix_ns = clock.to_unix(stop_ns);
  metadata.dropped_records = tracer.dropped_records();

  const uint64_t records = consumer.records();
  model::Trace trace = assemble_trace(target, std::move(plan), std::move(spans).build(stop_ns, clock),
                                      std::move(thread_names), std::move(metadata));
  exporters::write_chrome_trace(trace, base_name(output_path), output);
  output.commit();

  uint64_t op_count = 0;
  for (const auto& thread : trace.threads) op_count += thread.spans.size();
  console.line(std::string("stopped: ") + describe(reason) + ". Wrote " + output_path);
  console.line(group_thousands(op_count) + " ops on " + std::to_string(trace.threads.size()) + " threads from " +
               group_thousands(records) + " events; " + group_thousands(trace.metadata.dropped_records) +
               " events dropped; " + group_thousands(trace.metadata.unmatched_returns) +
               " returns of calls that began before attach (ignored)");
  if (trace.metadata.dropped_records > 0)
    console.line("warning: the ring buffer overflowed and events were lost; retry with a larger --buffer-mb");
  console.operator_table(top_operators_by_self_time(trace, 10));
  if (!fault.empty()) throw Error("recording stopped early: " + fault + " (the trace up to that point was written)");
  return 0;
}

}  // namespace tprof
