#include "userspace/loader/op_tracer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/perf_event.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <exception>
#include <future>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "op_record.h"
#include "op_tracer.skel.h"
#include "userspace/cli/error.h"
#include "userspace/loader/libbpf_messages.h"

namespace tprof {
namespace {

// The initial PID namespace's fixed inode (the kernel's PROC_PID_INIT_INO).
constexpr ino_t kInitialPidNamespaceInode = 0xEFFFFFFC;

// The op_plans key of op `op_id` of the target in `slot` (argument_reader.bpf.h).
uint64_t op_plan_key(uint32_t slot, uint32_t op_id) { return (static_cast<uint64_t>(slot) << 32) | op_id; }

}  // namespace

void OpTracer::SkeletonDeleter::operator()(op_tracer* skeleton) const { op_tracer__destroy(skeleton); }

OpTracer::OpTracer(size_t ring_buffer_bytes) {
  route_libbpf_messages();
  skeleton_.reset(op_tracer__open());
  if (!skeleton_) throw Error(errno_message("cannot open the op tracer BPF object", errno));
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t ring_bytes = std::bit_ceil(std::max(ring_buffer_bytes, page));
  if (bpf_map__set_max_entries(skeleton_->maps.op_records, static_cast<__u32>(ring_bytes)) != 0)
    throw Error("cannot size the ring buffer to " + std::to_string(ring_bytes) + " bytes");

  // Record ids as tprof's own /proc shows them: a node agent reads a container's threads by
  // their host ids, a sidecar in the target's PID namespace by the pod's.
  struct stat pid_namespace{};
  if (::stat("/proc/self/ns/pid", &pid_namespace) != 0)
    throw Error(errno_message("cannot stat /proc/self/ns/pid", errno));
  skeleton_->rodata->pid_namespace_inode = pid_namespace.st_ino;
  skeleton_->rodata->pid_namespace_is_initial = pid_namespace.st_ino == kInitialPidNamespaceInode;

  if (op_tracer__load(skeleton_.get()) != 0) {
    const int err = errno;
    // The privileges were checked before: what refuses now is usually a seccomp filter.
    if (err == EPERM)
      throw Error("the kernel refused to load BPF programs (EPERM) although tprof holds CAP_BPF: a seccomp "
                  "filter may forbid bpf(), as a container runtime's default profile does; run the container "
                  "with seccomp unconfined (docs/deploy.md)");
    throw Error(with_libbpf_messages(errno_message("cannot load the op tracer BPF programs", err)));
  }
  run_time_statistics_ = UniqueFd(bpf_enable_stats(BPF_STATS_RUN_TIME));
}

OpTracer::~OpTracer() = default;

std::unique_ptr<TargetProbes> OpTracer::add_target(const TargetOptions& options) {
  if (next_slot_ >= TARGET_SLOTS_MAX)
    throw Error("tprof records at most " + std::to_string(TARGET_SLOTS_MAX) + " processes in one session");
  return std::make_unique<TargetProbes>(*this, options, next_slot_++);
}

void OpTracer::attach_python_sampler(uint32_t frequency_hz) {
  if (!sampler_links_.empty()) return;
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) throw Error("cannot count the CPUs");
  perf_event_attr attributes{};
  attributes.size = sizeof(attributes);
  attributes.type = PERF_TYPE_SOFTWARE;
  attributes.config = PERF_COUNT_SW_CPU_CLOCK;
  attributes.freq = 1;
  attributes.sample_freq = frequency_hz;
  for (int cpu = 0; cpu < cpus; ++cpu) {
    // One event per CPU for all processes; the program keeps only the targets' threads,
    // which may come and go during recording.
    UniqueFd event(static_cast<int>(::syscall(SYS_perf_event_open, &attributes, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC)));
    if (!event) {
      if (errno == ENODEV) continue;  // a possible CPU that is not online
      throw Error(errno_message("cannot open the stack sampler's perf event on CPU " + std::to_string(cpu), errno));
    }
    bpf_link* link = bpf_program__attach_perf_event(skeleton_->progs.python_sample, event.get());
    if (!link) throw Error(errno_message("cannot attach the stack sampler", errno));
    sampler_links_.emplace_back(link);
    sampler_events_.push_back(std::move(event));
  }
  bpf_link* switches = bpf_program__attach(skeleton_->progs.python_switch);
  if (!switches) throw Error(errno_message("cannot attach to the scheduler's sched_switch tracepoint", errno));
  sampler_links_.emplace_back(switches);
}

OpTracer::ProgramStatistics OpTracer::ProgramStatistics::operator-(const ProgramStatistics& earlier) const {
  return {run_time_ns - earlier.run_time_ns, entry_traps - earlier.entry_traps, return_traps - earlier.return_traps,
          stepped_traps - earlier.stepped_traps};
}

// Each uprobe (and USDT) program runs once per trap; the others (the sampler's perf event, the
// sched_switch tracepoint) trap nothing.
std::optional<OpTracer::ProgramStatistics> OpTracer::program_statistics() const {
  if (!run_time_statistics_) return std::nullopt;
  ProgramStatistics statistics;
  bpf_program* program = nullptr;
  bpf_object__for_each_program(program, skeleton_->obj) {
    const int fd = bpf_program__fd(program);
    if (fd < 0) continue;  // not loaded (autoload off)
    bpf_prog_info info{};
    __u32 length = sizeof(info);
    if (bpf_prog_get_info_by_fd(fd, &info, &length) != 0) return std::nullopt;
    statistics.run_time_ns += info.run_time_ns;
    if (bpf_program__type(program) != BPF_PROG_TYPE_KPROBE) continue;
    const std::string_view name = bpf_program__name(program);
    (name == "range_return"           ? statistics.return_traps
     : name == "op_spilled_arguments" ? statistics.stepped_traps
                                      : statistics.entry_traps) += info.run_cnt;
  }
  return statistics;
}

int OpTracer::ring_buffer_fd() const { return bpf_map__fd(skeleton_->maps.op_records); }
int OpTracer::python_stacks_fd() const { return bpf_map__fd(skeleton_->maps.python_stacks); }

TargetProbes::TargetProbes(OpTracer& tracer, const TargetOptions& options, uint32_t slot)
    : tracer_(tracer), pid_(options.pid), slot_(slot) {
  if (options.python) settings_.python = *options.python;
  if (options.tensors) settings_.tensors = *options.tensors;
  settings_.node_sequence_nr_offset = options.node_sequence_nr_offset;
  settings_.node_thread_id_offset = options.node_thread_id_offset;
  settings_.sequence_counter_tls_index = options.sequence_counter_tls_index;
  settings_.sequence_counter_field_offset = options.sequence_counter_field_offset;
  settings_.slot = slot;
  settings_.recording = 0;
  if (!write_settings())
    throw Error(errno_message("cannot store the probe settings of process " + std::to_string(pid_), errno));
  // A pid recorded earlier in the session (the number reused) now names this target.
  const auto tgid = static_cast<__u32>(pid_);
  if (bpf_map__update_elem(skeleton().maps.target_slots, &tgid, sizeof(tgid), &slot_, sizeof(slot_), BPF_ANY) != 0)
    throw Error(errno_message("cannot register process " + std::to_string(pid_) + " with the op tracer", errno));
  const uint64_t no_steps = 0;
  bpf_map__update_elem(skeleton().maps.optimizer_steps, &slot_, sizeof(slot_), &no_steps, sizeof(no_steps), BPF_ANY);
  bpf_map__update_elem(skeleton().maps.libraries_loaded, &slot_, sizeof(slot_), &no_steps, sizeof(no_steps), BPF_ANY);
  set_recompile_reason_site({});  // the slot's last target's is no site of this one
}

TargetProbes::~TargetProbes() {
  detach();
  const auto tgid = static_cast<__u32>(pid_);
  __u32 registered = 0;
  if (bpf_map__lookup_elem(skeleton().maps.target_slots, &tgid, sizeof(tgid), &registered, sizeof(registered), 0) ==
          0 &&
      registered == slot_)
    bpf_map__delete_elem(skeleton().maps.target_slots, &tgid, sizeof(tgid), 0);
  for (const uint32_t op_id : planned_ops_) {
    const uint64_t key = op_plan_key(slot_, op_id);
    bpf_map__delete_elem(skeleton().maps.op_plans, &key, sizeof(key), 0);
  }
}

op_tracer& TargetProbes::skeleton() const { return *tracer_.skeleton_; }

bool TargetProbes::write_settings() {
  return bpf_map__update_elem(skeleton().maps.target_settings, &slot_, sizeof(slot_), &settings_, sizeof(settings_),
                              BPF_ANY) == 0;
}

void TargetProbes::add_op_probe(const bpf_program* program, const UprobeSites& sites, NarrowedSites narrowed_by) {
  OpProbe& probe = op_probes_.emplace_back(OpProbe{program, {}, narrowed_by, {}});
  if (op_probes_in_windows_) {
    probe.sites = sites;
    return;
  }
  // A selection may leave every site of a kind out (--ops '^cpp_fused_' probes no ATen op).
  if (!sites.offsets.empty()) probe.link = attach_uprobe_multi(program, pid_, sites);
  op_probes_linked_ = true;
}

// All at once, a thread a link: a trap of a probe still in costs the target as much as one that
// records, and linking thousands of sites takes ~30 us a site on the 2-vCPU test VM, so
// probes linked one kind after another would run for a kind's whole attach. Removing a link
// also waits for a grace period (40-80 ms a link there) once its sites are gone; in parallel
// those waits overlap.
uint64_t TargetProbes::link_op_probes(const WindowSites& narrowed) {
  if (op_probes_linked_ || !op_probes_in_windows_) return 0;
  std::vector<std::future<BpfLink>> links;
  uint64_t linked_sites = 0;
  for (const OpProbe& probe : op_probes_) {
    const UprobeSites& sites =
        probe.narrowed_by && narrowed.*probe.narrowed_by ? *(narrowed.*probe.narrowed_by) : probe.sites;
    linked_sites += sites.offsets.size();
    links.push_back(std::async(std::launch::async, [this, &probe, &sites]() -> BpfLink {
      if (sites.offsets.empty()) return {};  // none of its functions ran yet
      return attach_uprobe_multi(probe.program, pid_, sites);
    }));
  }
  std::exception_ptr failure;
  for (size_t index = 0; index < links.size(); ++index) {
    try {
      op_probes_[index].link = links[index].get();
    } catch (...) {
      failure = std::current_exception();
    }
  }
  op_probes_linked_ = true;
  if (!failure) return linked_sites;
  unlink_op_probes();
  std::rethrow_exception(failure);
}

uint64_t TargetProbes::op_probe_sites() const {
  uint64_t sites = 0;
  for (const OpProbe& probe : op_probes_) sites += probe.sites.offsets.size();
  return sites;
}

void TargetProbes::unlink_op_probes() noexcept {
  std::vector<std::thread> removals;
  for (OpProbe& probe : op_probes_) {
    if (!probe.link) continue;
    try {
      removals.emplace_back([link = std::move(probe.link)]() mutable { link.reset(); });
    } catch (const std::system_error&) {
      probe.link.reset();  // no thread to spare: removed here, one after another
    }
  }
  for (std::thread& removal : removals) removal.join();
  op_probes_linked_ = false;
}

void TargetProbes::attach_ops(const UprobeSites& sites) {
  add_op_probe(skeleton().progs.op_enter, sites, &WindowSites::op_entries);
}

void TargetProbes::attach_exits(const UprobeSites& returns, const UprobeSites& catches) {
  if (!returns.offsets.empty()) add_op_probe(skeleton().progs.range_return, returns, &WindowSites::returns);
  if (!catches.offsets.empty()) add_op_probe(skeleton().progs.exception_caught, catches);
}

void TargetProbes::set_op_plan(uint32_t op_id, const op_plan& plan) {
  const uint64_t key = op_plan_key(slot_, op_id);
  if (bpf_map__update_elem(skeleton().maps.op_plans, &key, sizeof(key), &plan, sizeof(plan), BPF_ANY) != 0)
    throw Error(errno_message("cannot store the argument plan of op " + std::to_string(op_id), errno));
  planned_ops_.push_back(op_id);
}

bool TargetProbes::set_recompile_reason_site(const recompile_reason_site& site) const noexcept {
  return bpf_map__update_elem(skeleton().maps.recompile_reason_sites, &slot_, sizeof(slot_), &site, sizeof(site),
                              BPF_ANY) == 0;
}

void TargetProbes::attach_spilled_arguments(const UprobeSites& sites) {
  if (!sites.offsets.empty())
    add_op_probe(skeleton().progs.op_spilled_arguments, sites, &WindowSites::spilled_arguments);
}

void TargetProbes::attach_annotations(const UprobeSites& name_kernels, const UprobeSites& constructor,
                                      const UprobeSites& end) {
  // The end probe first, then the constructor, then the names: an annotation is only opened
  // once everything that closes it is in place.
  add_op_probe(skeleton().progs.annotation_end, end);
  add_op_probe(skeleton().progs.annotation_begin, constructor);
  add_op_probe(skeleton().progs.annotation_name, name_kernels);
  // Within windows both programs run on one trap, which program_statistics() counts twice: an
  // emulated trap a step too many.
  if (op_probes_in_windows_)
    step_markers_link_ = attach_uprobe_multi(skeleton().progs.step_marker, pid_, name_kernels);
}

void TargetProbes::attach_compiled_regions(const UprobeSites& naming_functions) {
  add_op_probe(skeleton().progs.compiled_region_name, naming_functions);
}

void TargetProbes::attach_boxed_ops(const UprobeSites& entry, const UprobeSites& returns) {
  if (!returns.offsets.empty()) add_op_probe(skeleton().progs.range_return, returns);
  add_op_probe(skeleton().progs.boxed_op_enter, entry);
}

void TargetProbes::attach_wait_counters(const UprobeSites& constructor, const UprobeSites& constructed,
                                        const UprobeSites& start, const UprobeSites& stop) {
  wait_counter_links_.push_back(attach_uprobe_multi(skeleton().progs.wait_counter_stop, pid_, stop));
  wait_counter_links_.push_back(attach_uprobe_multi(skeleton().progs.wait_counter_start, pid_, start));
  wait_counter_links_.push_back(attach_uprobe_multi(skeleton().progs.wait_counter_built, pid_, constructed));
  wait_counter_links_.push_back(attach_uprobe_multi(skeleton().progs.wait_counter_building, pid_, constructor));
}

void TargetProbes::attach_autograd(const UprobeSites& evaluate_function, const UprobeSites& node_apply) {
  add_op_probe(skeleton().progs.evaluate_enter, evaluate_function);
  if (!node_apply.offsets.empty()) add_op_probe(skeleton().progs.node_enter, node_apply, &WindowSites::node_applies);
}

void TargetProbes::attach_api_calls(const UprobeSites& entries, const UprobeSites& returns) {
  api_return_links_.push_back(attach_uprobe_multi(skeleton().progs.range_return, pid_, returns));
  api_call_links_.push_back(attach_uprobe_multi(skeleton().progs.api_call_enter, pid_, entries));
}

// A call in flight keeps its range open until an enclosing one closes (span_closer.h): at worst
// one range a thread is a little long.
void TargetProbes::detach_api_calls() noexcept {
  api_call_links_.clear();
  api_return_links_.clear();
}

void TargetProbes::attach_compiled_kernel(const UprobeSites& entries, const UprobeSites& returns) {
  if (!returns.offsets.empty())  // none found: the range closes with its caller's (span_closer.h)
    compiled_kernel_links_.push_back(attach_uprobe_multi(skeleton().progs.range_return, pid_, returns));
  compiled_kernel_links_.push_back(attach_uprobe_multi(skeleton().progs.compiled_kernel_enter, pid_, entries));
}

void TargetProbes::attach_library_loads(const std::string& loader_path) {
  LIBBPF_OPTS(bpf_uprobe_multi_opts, opts);
  bpf_link* link = bpf_program__attach_uprobe_multi(skeleton().progs.library_loaded, pid_, loader_path.c_str(),
                                                    "_dl_debug_state", &opts);
  if (!link) throw Error(errno_message("cannot attach to _dl_debug_state in " + loader_path, errno));
  library_loads_link_.reset(link);
}

uint64_t TargetProbes::libraries_loaded() const {
  uint64_t loads = 0;
  bpf_map__lookup_elem(skeleton().maps.libraries_loaded, &slot_, sizeof(slot_), &loads, sizeof(loads), 0);
  return loads;
}

void TargetProbes::attach_memory(const UprobeSites& allocations, const UprobeSites& frees,
                                 const UprobeSites& device_reports) {
  memory_free_link_ = attach_uprobe_multi(skeleton().progs.memory_freed, pid_, frees);
  memory_allocation_link_ = attach_uprobe_multi(skeleton().progs.memory_allocated, pid_, allocations);
  if (!device_reports.offsets.empty())
    device_memory_link_ = attach_uprobe_multi(skeleton().progs.device_memory_reported, pid_, device_reports);
}

void TargetProbes::attach_device_activity(const std::string& library_path) {
  bpf_link* link = bpf_program__attach_usdt(skeleton().progs.device_activity_batch, pid_, library_path.c_str(),
                                            "tprof", "device_activity", nullptr);
  if (!link) throw Error(errno_message("cannot attach to tprof:device_activity in " + library_path, errno));
  device_activity_link_.reset(link);
}

void TargetProbes::start_recording() {
  settings_.recording = 1;
  if (!write_settings())
    throw Error(errno_message("cannot start recording process " + std::to_string(pid_), errno));
}

// Never throws: what was recorded must still be written out. Should the map refuse the update,
// the probes stop as their links go.
void TargetProbes::stop_recording() noexcept {
  if (!settings_.recording) return;
  settings_.recording = 0;
  write_settings();
}

void TargetProbes::detach() noexcept {
  stop_recording();
  // Entries before exits (nothing records any more; what is still in may fire meanwhile).
  for (auto probe = op_probes_.rbegin(); probe != op_probes_.rend(); ++probe) probe->link = {};
  op_probes_.clear();
  op_probes_linked_ = false;
  step_markers_link_ = {};
  memory_allocation_link_ = {};
  device_memory_link_ = {};
  memory_free_link_ = {};
  detach_api_calls();
  for (auto link = compiled_kernel_links_.rbegin(); link != compiled_kernel_links_.rend(); ++link) *link = {};
  compiled_kernel_links_.clear();
  library_loads_link_ = {};
  device_activity_link_ = {};
}

uint64_t TargetProbes::optimizer_steps() const {
  uint64_t steps = 0;
  bpf_map__lookup_elem(skeleton().maps.optimizer_steps, &slot_, sizeof(slot_), &steps, sizeof(steps), 0);
  return steps;
}

LossCounts TargetProbes::losses() const {
  const int cpus = libbpf_num_possible_cpus();
  auto read_counter = [&](__u32 counter) -> uint64_t {
    if (cpus <= 0) return 0;
    const __u32 key = slot_ * LOSS_COUNTER_COUNT + counter;
    std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
    if (bpf_map__lookup_elem(skeleton().maps.loss_counters, &key, sizeof(key), per_cpu.data(),
                             per_cpu.size() * sizeof(uint64_t), 0) != 0)
      return 0;
    uint64_t total = 0;
    for (uint64_t count : per_cpu) total += count;
    return total;
  };
  return LossCounts{read_counter(LOSS_RING_BUFFER_FULL), read_counter(LOSS_STACK_UNREADABLE),
                    read_counter(LOSS_STACK_NOT_STORED), read_counter(LOSS_ARGUMENTS_UNREADABLE),
                    read_counter(LOSS_RANGE_NOT_TRACKED), read_counter(LOSS_DEVICE_ACTIVITY_UNREADABLE),
                    read_counter(LOSS_THREAD_STATE_NOT_FOUND), read_counter(LOSS_THREAD_SEARCH_CUT)};
}

}  // namespace tprof
