// The loaded op tracer (bpf/op_tracer.bpf.c), one per session whatever the number of targets:
// its skeleton, its ring buffer, the Python stack sampler's perf events (which see every
// process), and per target a TargetProbes: the target's settings in the tracer's maps and its
// uprobe_multi links, owned together.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "op_arguments.h"
#include "python_stack.h"
#include "recompile_reason_site.h"
#include "target_settings.h"
#include "userspace/loader/unique_fd.h"
#include "userspace/loader/uprobe_multi.h"

struct op_tracer;

namespace tprof {

// What the probes need to know of one target process.
struct TargetOptions {
  pid_t pid = 0;  // in tprof's PID namespace
  // Where the target's interpreter keeps its frames; none: no Python stacks.
  std::optional<python_walker_config> python;
  // The calibrated TensorImpl layout; none: ops are recorded without arguments (no shapes).
  std::optional<tensor_layout> tensors;
  // Where torch::autograd::Node keeps these; 0: unknown, not read.
  uint32_t node_sequence_nr_offset = 0;
  uint32_t node_thread_id_offset = 0;
  // The thread's autograd sequence counter: where the target keeps libtorch's TLS index for it
  // (target_settings.h), and the counter's offset from that variable; 0: not read.
  uint64_t sequence_counter_tls_index = 0;
  uint64_t sequence_counter_field_offset = 0;
};

struct LossCounts {
  uint64_t ring_buffer_full = 0;   // records dropped
  uint64_t stack_unreadable = 0;   // Python stacks that could not be walked (no walk buffer)
  uint64_t stack_not_stored = 0;   // walked stacks that found no room in the stack map
  uint64_t arguments_unreadable = 0;  // records sent without their arguments (no scratch memory)
  uint64_t ranges_not_tracked = 0;    // ranges nested too deep to track; closed by their parent
  uint64_t device_activity_unreadable = 0;  // GPU activity records not read (or of another ABI)
  uint64_t thread_state_not_found = 0;  // stack walks that found no PyThreadState of their thread
  uint64_t thread_search_cut = 0;       // likewise, the thread list being longer than the search bound
};

class TargetProbes;

class OpTracer {
 public:
  // Opens and loads the programs, with a ring buffer of `ring_buffer_bytes` (rounded up to a
  // power of two) for all targets. Throws tprof::Error.
  explicit OpTracer(size_t ring_buffer_bytes);
  ~OpTracer();
  OpTracer(const OpTracer&) = delete;
  OpTracer& operator=(const OpTracer&) = delete;

  // A new target: its settings stored under a slot of its own, its probes silent until
  // TargetProbes::start_recording(). Throws tprof::Error when the slots are used up.
  std::unique_ptr<TargetProbes> add_target(const TargetOptions& options);

  // A CPU-clock sampler on every CPU at `frequency_hz` that records the Python stacks of
  // every target with Python stacks between ops, and the stacks of their threads as they
  // block and run again (the sched_switch tracepoint). Attached once; later calls do nothing.
  void attach_python_sampler(uint32_t frequency_hz);

  int ring_buffer_fd() const;
  int python_stacks_fd() const;

  // What the kernel has counted of the tracer's programs, in every process (BPF run time
  // statistics, enabled while the tracer lives): their run time, and the uprobe traps that ran
  // them, by the kind of instruction trapped. What it gains over a window is what the probes
  // cost: the traps, and the programs' work.
  struct ProgramStatistics {
    uint64_t run_time_ns = 0;
    uint64_t entry_traps = 0;    // at a function's first instruction (a `push` the kernel emulates)
    uint64_t return_traps = 0;   // at a `ret` (single-stepped)
    uint64_t stepped_traps = 0;  // inside a function (the spilled doubles' reads: single-stepped)
    ProgramStatistics operator-(const ProgramStatistics& earlier) const;
  };
  // None where the kernel keeps no statistics.
  std::optional<ProgramStatistics> program_statistics() const;

 private:
  friend class TargetProbes;
  struct SkeletonDeleter {
    void operator()(op_tracer* skeleton) const;
  };
  std::unique_ptr<op_tracer, SkeletonDeleter> skeleton_;
  uint32_t next_slot_ = 0;
  std::vector<UniqueFd> sampler_events_;
  // BPF_ENABLE_STATS: the kernel times every BPF program while it is open (about two clock reads
  // a run); invalid where it refused.
  UniqueFd run_time_statistics_;
  std::vector<BpfLink> sampler_links_;
};

// One target's part of the op tracer. Destroying it detaches its probes and removes its
// settings and plans from the maps; records already in the ring buffer stay readable.
class TargetProbes {
 public:
  TargetProbes(OpTracer& tracer, const TargetOptions& options, uint32_t slot);
  ~TargetProbes();
  TargetProbes(const TargetProbes&) = delete;
  TargetProbes& operator=(const TargetProbes&) = delete;

  // Entry probes on every op site: cookies are op ids.
  void attach_ops(const UprobeSites& sites);
  // Where ranges end (userspace/loader/exit_probes.h): the `ret` instructions of the op and autograd
  // functions, and __cxa_begin_catch (no offsets: not probed). Attach before their entries.
  void attach_exits(const UprobeSites& returns, const UprobeSites& catches);
  // Probes record only between these two calls: start once everything is attached, stop
  // before detaching, so that all kinds of record begin and end at the same moment.
  void start_recording();
  void stop_recording() noexcept;
  // Removes every probe (stopping the recording first). Records already in the ring buffer
  // stay readable.
  void detach() noexcept;

  LossCounts losses() const;  // summed over CPUs

  // The argument plan of op `op_id` (only with `tensors` set). Call before attach_ops.
  void set_op_plan(uint32_t op_id, const op_plan& plan);
  // Where the target's dynamo keeps why it compiles a frame again, read as a compile's wait
  // counter stops (bpf/recompile_reason_site.h). False if the map refused it: the compiles then
  // go without their reasons.
  bool set_recompile_reason_site(const recompile_reason_site& site) const noexcept;
  // The ops' spill probes (userspace/loader/spill_probes.h): cookies are op ids. Attach before
  // their entries, so that no entry misses its doubles.
  void attach_spilled_arguments(const UprobeSites& sites);
  // record_function() ranges: the kernels whose second argument is the name, at::RecordFunction's
  // constructor and its end().
  // Single sites go through uprobe_multi links too: a classic uprobe costs several times more
  // per hit, and RecordFunction's constructor and end() run for every engine node.
  void attach_annotations(const UprobeSites& name_kernels, const UprobeSites& constructor, const UprobeSites& end);
  // Where dynamo names its compiled regions (symbolizer/dynamo/compiled_region_sites.h), each
  // site's cookie the argument that holds the name; after attach_annotations, whose constructor
  // and end() probes open and close them.
  void attach_compiled_regions(const UprobeSites& naming_functions);
  // Ops called from Python through the boxed dispatcher (symbolizer/aten/boxed_call_site.h):
  // the entry of the function they pass, its cookie how that takes the operators, and its `ret`s.
  // Windowed with the ops under --max-overhead.
  void attach_boxed_ops(const UprobeSites& entry, const UprobeSites& returns);
  // c10's wait counters (symbolizer/dynamo/wait_counter_sites.h), all in libc10: stop() closes
  // through the annotations' end program, start() opens, the constructor's entry and `ret`s name.
  // Not windowed under --max-overhead: they run at compiles, not at ops.
  void attach_wait_counters(const UprobeSites& constructor, const UprobeSites& constructed, const UprobeSites& start,
                            const UprobeSites& stop);
  // Backward nodes: Engine::evaluate_function and every Node subclass's apply().
  void attach_autograd(const UprobeSites& evaluate_function, const UprobeSites& node_apply);

  // --max-overhead: the probes that fire at every op or autograd node (ops' entries, exits and
  // spilled doubles, autograd nodes, RecordFunction's constructor and end()) are in only for
  // windows; the step markers (a probe on the record_function kernels that counts the
  // optimizer's steps), CUDA API calls and the stack sampler stay. Call before attaching: those probes
  // are then kept unlinked until link_op_probes().
  void keep_op_probes_for_windows() { op_probes_in_windows_ = true; }
  // What a window links in place of every attached site, by probe: fewer sites cost less to put
  // in and take out (~30 us a site on the test VM). None: that probe's sites as attached.
  struct WindowSites {
    std::optional<UprobeSites> op_entries, returns, spilled_arguments, node_applies;
  };
  // Links them, exits first as at attach, and says how many sites it linked; unlinks them,
  // entries first. No-ops when so already.
  uint64_t link_op_probes(const WindowSites& narrowed = {});
  void unlink_op_probes() noexcept;
  bool op_probes_linked() const { return op_probes_linked_; }
  uint64_t op_probe_sites() const;  // all that were attached for windows
  // The Optimizer.step annotations named in the target since it became one (BPF counts them).
  uint64_t optimizer_steps() const;
  // CUDA API entry points (cuda_api_probes.h), ranges like ops without arguments or Python
  // stacks: cookies are their operator indices. Their `ret` sites go in first, as for ops.
  void attach_api_calls(const UprobeSites& entries, const UprobeSites& returns);
  // Removes those probes (entries first): CUPTI reports the same calls once CUDA has loaded the
  // injection library, and a trap per call is a cost without a use then.
  void detach_api_calls() noexcept;
  // Inductor's C++ kernels, found while recording (userspace/session/compiled_kernel_watch.h):
  // ranges like ops, with Python stacks and no arguments; cookies are their operator indices.
  // Not windowed by --max-overhead: a kernel library comes and stays, and is probed once.
  void attach_compiled_kernel(const UprobeSites& entries, const UprobeSites& returns);
  // The dynamic loader's _dl_debug_state in the loader at `loader_path` (as tprof opens it), which
  // ld.so calls at every dlopen: libraries_loaded() counts its calls while recording. Throws
  // tprof::Error.
  void attach_library_loads(const std::string& loader_path);
  uint64_t libraries_loaded() const;
  // --memory: the allocators' reports of each block they hand out and take back
  // (memory_probes.h): the CPU's, and the devices' (no offsets: not probed). Frees first, so
  // that no block is seen allocated whose free is missed.
  void attach_memory(const UprobeSites& allocations, const UprobeSites& frees, const UprobeSites& device_reports);
  // GPU activity: the USDT probe tprof:device_activity of the CUPTI injection library at
  // `library_path` (as tprof sees the file, through /proc/PID/root). Attaching raises the probe's
  // semaphore, which wakes the library; detaching lowers it again.
  void attach_device_activity(const std::string& library_path);

 private:
  bool write_settings();  // false: the map refused them (errno says why)
  op_tracer& skeleton() const;
  using NarrowedSites = std::optional<UprobeSites> WindowSites::*;
  // Attaches one kind of per-op probe, or keeps it for link_op_probes(), which links the sites
  // `narrowed_by` names in its WindowSites where it names some.
  void add_op_probe(const bpf_program* program, const UprobeSites& sites, NarrowedSites narrowed_by = nullptr);

  OpTracer& tracer_;
  const pid_t pid_;
  const uint32_t slot_;
  std::vector<uint32_t> planned_ops_;  // op ids with a plan in op_plans, removed with the target
  // The probes that fire at every op, in attach order (which links them before their entries).
  struct OpProbe {
    const bpf_program* program;
    UprobeSites sites;  // kept only for windows
    NarrowedSites narrowed_by;
    BpfLink link;
  };
  std::vector<OpProbe> op_probes_;
  bool op_probes_in_windows_ = false;
  bool op_probes_linked_ = false;
  BpfLink step_markers_link_;  // the record_function kernels, counting Optimizer.step
  BpfLink memory_free_link_;
  BpfLink memory_allocation_link_;
  BpfLink device_memory_link_;
  std::vector<BpfLink> api_call_links_;
  std::vector<BpfLink> compiled_kernel_links_;  // entries and returns, in attach order
  std::vector<BpfLink> wait_counter_links_;     // stop, start, the constructor's rets and entry
  BpfLink library_loads_link_;
  std::vector<BpfLink> api_return_links_;
  BpfLink device_activity_link_;
  target_settings settings_{};
};

}  // namespace tprof
