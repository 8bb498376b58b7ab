// The neutral trace model: what was recorded, already symbolized and on the wall clock. The
// attach session streams it to exporters through model/trace_sink.h; the whole-trace `Trace`
// below is for tests and offline tools, which replay it into the same sinks. Nothing here
// knows about BPF, ELF or any output format.
#pragma once

#include <boost/container/small_vector.hpp>
#include <boost/container/static_vector.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tprof::model {

// What a recorded range is, in torch's terms (its RecordFunction scope and trace category).
enum class RangeKind {
  kOperator,          // an ATen op: cpu_op, RecordScope FUNCTION
  kUserAnnotation,    // record_function("name"): user_annotation, RecordScope USER_SCOPE
  kBackwardEvaluate,  // "autograd::engine::evaluate_function: <Node>": cpu_op, FUNCTION
  kBackwardNode,      // the node itself, "MmBackward0": cpu_op, BACKWARD_FUNCTION
  kCudaRuntime,       // a CUDA runtime call seen by its uprobe (no CUPTI): cuda_runtime, not in the ET
  kCudaDriver,        // a CUDA driver call likewise: cuda_driver
  // A range C code names with FUNCTION scope, as dynamo's frame evaluator does around each call
  // of a compiled graph ("Torch-Compiled Region: 0/1", "TorchDynamo Cache Lookup"): cpu_op.
  kFunctionRange,
  // One of inductor's C++ kernels, probed in the library torch.compile built
  // (symbolizer/dynamo/inductor_kernels.h): cpu_op, as torch's profiler shows it with
  // TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1; not in the ET, which torch's observer leaves it out
  // of without that setting.
  kCompiledKernel,
  // A c10::monitor::WaitCounter's range, start() to stop(), named by its key
  // ("pytorch.wait_counter.dynamo_compile"): user_annotation, and a USER_SCOPE node in the ET.
  // torch.profiler has no such range: tprof's own.
  kWaitCounter,
};

// One kind of recorded range: an ATen operator as named by its schema, or a named annotation
// or autograd node.
struct Operator {
  std::string name;    // "aten::add": the name torch.profiler shows (no overload)
  std::string schema;  // "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";
                       // empty when the schema string was not found in the library, and for
                       // everything that is not an ATen op
  RangeKind kind = RangeKind::kOperator;
  // Per schema argument, whether the schema marks it written in place (`Tensor(a!) self`);
  // empty where the schema is not known.
  std::vector<bool> writes_argument;
  // kCompiledKernel: the generated C++ it was compiled from, as the target names the file.
  std::string source_file;
};

// A tensor's sizes or strides. BPF copies at most 16 dims of a tensor (bpf/op_arguments.h
// OUT_OF_LINE_DIMS_MAX), so they live inline: millions of values a second are decoded, moved
// and freed, and a heap block per list was the pipeline's largest single cost.
using Dims = boost::container::static_vector<int64_t, 16>;
// An int list's elements as far as BPF copied them (up to LIST_ELEMENTS_MAX), or an int's value:
// inline up to 16, the common case, on the heap beyond.
using IntValues = boost::container::small_vector<int64_t, 16>;

// A tensor as an op saw it.
struct TensorValue {
  uint64_t impl_address = 0;     // the TensorImpl: the same address is the same tensor
  uint64_t storage_address = 0;  // the storage's data pointer: views share it; 0: no storage; 1: a
                                 // storage whose data pointer is null (no allocation lies at 1)
  Dims sizes;
  Dims strides;
  int64_t storage_offset = 0;    // elements
  int64_t numel = 0;
  std::string dtype;             // caffe2 name, as torch's "Input type": "float", "long int"
  uint32_t itemsize = 0;         // bytes per element
  std::string device;            // "cpu", "cuda:0"
};

enum class ValueKind {
  kUnknown,          // not captured: the profiler could not reach or read it
  kTensor,
  kUndefinedTensor,  // an undefined at::Tensor; `tensor` holds only its impl_address
  kNone,             // an absent optional
  kInt,              // int64, SymInt, or an enum passed as an integer
  kBool,
  kDouble,
  kDevice,           // a c10::Device: `text`
  kString,           // a str: `text`
  kObject,           // an object torch shows by its type's name only, `text`: "Generator"
  kTensorList,
  kIntList,
  kBoolList,         // bool[N]: `ints` holds 0 or 1 per element
  kDoubleList,       // a Scalar[] of floats (a foreach op's scalars): `reals`
};

// One argument or return value of an op.
struct Value {
  ValueKind kind = ValueKind::kUnknown;
  std::string schema_type;           // "Tensor", "Tensor?", "int[]", "Scalar"; "" if unknown
  TensorValue tensor;                // kTensor
  std::vector<TensorValue> tensors;  // kTensorList: its first elements
  IntValues ints;                    // kInt: one; kIntList, kBoolList: its first elements
  uint32_t list_length = 0;          // kTensorList, kIntList, kBoolList, kDoubleList: the whole list's length
  bool boolean = false;              // kBool
  double real = 0;                   // kDouble
  std::vector<double> reals;         // kDoubleList: its first elements
  std::string text;                  // kDevice: "cpu", "cuda:0" (Device::str()); kString
};

// How many elements of a list value were read; 0 for any other kind of value.
inline size_t elements_read(const Value& value) {
  switch (value.kind) {
    case ValueKind::kIntList:
    case ValueKind::kBoolList: return value.ints.size();
    case ValueKind::kDoubleList: return value.reals.size();
    case ValueKind::kTensorList: return value.tensors.size();
    default: return 0;
  }
}

// A list value of which only the first elements were read: past LIST_ELEMENTS_MAX
// (bpf/op_arguments.h), up to an element BPF could not read, or short of a continuation record
// lost. Exporters write the elements read and say that the list was cut short.
inline bool is_partial_list(const Value& value) {
  switch (value.kind) {
    case ValueKind::kIntList:
    case ValueKind::kBoolList:
    case ValueKind::kDoubleList:
    case ValueKind::kTensorList: return elements_read(value) != value.list_length;
    default: return false;
  }
}

// Whether the value was read in full: neither unknown nor a partial list.
inline bool is_known(const Value& value) { return value.kind != ValueKind::kUnknown && !is_partial_list(value); }

// How a value that was not read in full is described to the user: "not read", or "1024 of 1500
// elements read"; "" for a value read in full.
inline std::string unread_part(const Value& value) {
  if (value.kind == ValueKind::kUnknown) return "not read";
  if (!is_partial_list(value)) return "";
  return std::to_string(elements_read(value)) + " of " + std::to_string(value.list_length) + " elements read";
}

// One Python frame of an op's call stack.
struct PythonFrame {
  std::string file;
  int line = 0;           // the line executing in that frame (the call site); 0 if unknown
  std::string function;   // co_name, as torch's profiler names frames (CodeLocation)
  std::string qualified_name;  // co_qualname (3.11+; co_name before)
  bool operator==(const PythonFrame&) const = default;
};

// "file(line): function", as torch's profiler prints a frame (stacksToStr).
inline std::string frame_label(const PythonFrame& frame) {
  return frame.file + "(" + std::to_string(frame.line) + "): " + frame.function;
}

// A call stack, innermost frame first.
using PythonStack = std::vector<PythonFrame>;

// One Python function invocation on one thread, as torch's Python tracer shows it
// (python_function events). Its edges are known to within the nearest op or stack sample.
struct PythonSpan {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t python_id = 0;         // unique, from 1 in start order
  uint64_t parent_python_id = 0;  // the enclosing python_function's id; 0: none
  int64_t module_id = -1;         // "Python module id" of nn.Module calls; -1 otherwise
  uint32_t depth = 0;             // enclosing python spans on this thread
  std::string name;               // "path(line): co_name", "nn.Module: Linear_0", ...
  std::string qualified_name;     // co_qualname where it says more than co_name: "Conv2d._conv_forward"
};

// One op invocation on one thread. Times are wall-clock Unix nanoseconds.
struct OpSpan {
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t record_id = 0;   // the process-wide op id, handed out at entry: Chrome "External
                            // id"/"Record function id", ET rf_id
  uint64_t parent_record_id = 0;  // the enclosing range on this thread (an op or the step
                                  // annotation); 0: none
  uint32_t operator_index = 0;  // into the operator table
  uint32_t depth = 0;           // number of enclosing ops on this thread
  // A part of an iteration that is no whole step: what ran in a window of ops before its first
  // step boundary (--max-overhead), whose step number is not known.
  static constexpr uint64_t kNoStep = UINT64_MAX;
  uint64_t step = 0;            // the N of the ProfilerStep#N open when it began (a step: its own)
  bool closed_at_stop = false;  // still running when recording stopped; end_ns is the stop time
  bool unwound = false;         // a C++ exception ended it; end_ns is when a handler caught it
  bool return_missing = false;  // neither its return nor its unwinding was seen (longjmp, a
                                // lost record); end_ns is when its thread showed it gone
  int32_t python_stack = -1;    // into Trace::python_stacks; -1: none captured
  bool arguments_recorded = false;  // inputs/outputs were captured (record_shapes)
  std::vector<Value> inputs;    // schema order
  std::vector<Value> outputs;   // a compile's wait counter (kWaitCounter): its recompile reason, one kString
  uint64_t flops = 0;           // as torch's with_flops estimates them from the inputs; 0: none
  // Autograd sequence number; -1: none. Backward ranges: their node's. Forward ops: the node
  // the op itself created (not one made by an op it called).
  int64_t sequence_number = -1;
  uint64_t forward_thread = 0;  // backward ranges: the forward thread's RecordFunction id; 0: none
  // --memory: the bytes of CPU blocks allocated less those freed on its thread while it ran,
  // as torch's "CPU Mem" counts them: with what it encloses, and without (its "Self CPU Mem").
  int64_t cpu_memory_bytes = 0;
  int64_t self_cpu_memory_bytes = 0;
  // Likewise of a device's blocks (CUDA Mem, Self CUDA Mem).
  int64_t device_memory_bytes = 0;
  int64_t self_device_memory_bytes = 0;
};

// A block of a device's allocator allocated or freed (--memory): Kineto's [memory] instant event.
struct MemoryEvent {
  uint64_t time_ns = 0;           // wall clock
  uint32_t tid = 0;
  uint64_t address = 0;
  int64_t bytes = 0;              // negative for a free
  // After it: the bytes of the device's blocks tprof saw allocated and not yet freed, as torch's
  // reporter counts them from when profiling began; and those its allocator holds (0: the CPU's
  // holds nothing beyond).
  int64_t total_allocated = 0;
  int64_t total_reserved = 0;
  int8_t device_type = 0;         // c10::DeviceType: CPU 0, CUDA 1
  int8_t device_index = -1;       // -1 for the CPU
  uint64_t external_id = 0;       // the innermost range open on its thread (an op's record id); 0: none
  const PythonStack* stack = nullptr;  // the allocating thread's stack (frees: none); null: none
  // That range's name, valid only during the sink's call (the operator table may grow); null: none.
  const std::string* range_name = nullptr;
};

// The blocks live at the peak, grouped by where they were allocated (--memory).
struct MemoryHolder {
  int64_t bytes = 0;
  uint64_t blocks = 0;
  std::string op;       // the innermost range open when they were allocated; "": none
  PythonStack stack;    // innermost frame first; empty: none recorded
};

// --memory: what the allocators did while recording. The peak and its holders are the CPU's.
struct MemorySummary {
  uint64_t allocations = 0;       // [memory] events written
  uint64_t frees = 0;
  // Frees of blocks tprof never saw allocated (before it came), left out as torch leaves out
  // those from before profiling began.
  uint64_t frees_of_unknown_blocks = 0;
  // Allocations not kept in tprof's address map, which was full: left out, with their frees.
  uint64_t blocks_forgotten = 0;
  int64_t peak_allocated_bytes = 0;
  uint64_t peak_unix_ns = 0;      // when it was first reached; 0: nothing allocated
  int64_t allocated_at_end = 0;   // seen allocated and still live when recording stopped
  std::vector<MemoryHolder> peak_holders;  // largest first
  // A device's blocks (the CUDA caching allocator's), sized and totalled by it: events written,
  // and the largest total allocated they reported (of any device).
  uint64_t device_events = 0;
  int64_t device_peak_allocated_bytes = 0;
  // A --schedule cycle's: the CPU blocks still live at its end that were allocated before it
  // began (since tprof attached), by where: what earlier steps keep, a leak's first suspects.
  uint64_t cycle_start_unix_ns = 0;  // 0: not a cycle's summary
  std::vector<MemoryHolder> live_from_earlier_cycles;
};

// What a GPU activity is, as the CUPTI library reports it (bpf/device_activity.h).
enum class DeviceActivityKind {
  kKernel,   // kernel: on its device and stream
  kMemcpy,   // gpu_memcpy
  kMemset,   // gpu_memset
  kSync,     // cuda_sync: a synchronization, on its device and stream
  kRuntime,  // cuda_runtime: a CUDA runtime API call, on its CPU thread
  kDriver,   // cuda_driver: a CUDA driver API call, on its CPU thread
};

// One GPU activity, or one CUDA API call, on the wall clock.
struct DeviceActivity {
  DeviceActivityKind kind = DeviceActivityKind::kKernel;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  std::string name;          // demangled kernel name, "Memcpy HtoD (Pageable -> Device)",
                             // "Memset (Device)", "cudaLaunchKernel", "Context Sync"
  uint32_t device = 0;
  uint32_t context = 0;
  int64_t stream = -1;       // -1: none (a context synchronization)
  uint32_t correlation = 0;  // CUPTI's: an API call and what it launched share it
  uint32_t tid = 0;          // API calls: the calling thread; 0: not known
  uint32_t cbid = 0;         // API calls: CUPTI's callback id
  uint64_t bytes = 0;        // copies and memsets
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  uint32_t registers_per_thread = 0;
  uint32_t shared_memory = 0;
  // Kernels on a device whose properties are known: Kineto's occupancy estimates
  // (DeviceProperties.cpp): grid blocks per SM, their warps per SM, and the share of the SM's
  // threads the resident blocks fill, in whole percent (-1: the occupancy limit is unknown).
  bool has_occupancy = false;
  float blocks_per_sm = 0;
  float warps_per_sm = 0;
  int achieved_occupancy_percent = -1;
  // The record id of the range it belongs to: an API call's innermost enclosing op or
  // annotation; a GPU activity's, that of the call that launched it. 0: none known.
  uint64_t external_id = 0;
  // GPU activities: where the call that launched it ran, for the ac2g flow arrow.
  uint32_t launch_tid = 0;       // 0: its launch is not known
  uint64_t launch_start_ns = 0;
};

// One GPU, as its CUDA driver describes it: Kineto's deviceProperties entry.
struct DeviceProperties {
  uint32_t id = 0;  // CUDA device index
  std::string name;
  uint64_t total_global_memory = 0;
  uint32_t compute_major = 0;
  uint32_t compute_minor = 0;
  uint32_t max_threads_per_block = 0;
  uint32_t max_threads_per_multiprocessor = 0;
  uint32_t registers_per_block = 0;
  uint32_t registers_per_multiprocessor = 0;
  uint32_t warp_size = 0;
  uint32_t shared_memory_per_block = 0;
  uint32_t shared_memory_per_multiprocessor = 0;
  uint32_t shared_memory_per_block_optin = 0;
  uint32_t multiprocessors = 0;
};

// A forward op and the backward node that differentiates it: Kineto's fwdbwd flow.
struct ForwardBackwardLink {
  uint32_t forward_thread_index = 0;  // into Trace::threads
  uint32_t forward_span_index = 0;    // into that thread's spans
  uint32_t backward_thread_index = 0;
  uint32_t backward_span_index = 0;
};

struct ThreadTrack {
  uint32_t tid = 0;
  std::string name;            // /proc/PID/task/TID/comm
  uint64_t entry_id = 0;       // see ThreadInfo::entry_id (model/trace_sink.h)
  std::vector<OpSpan> spans;   // sorted by start; a parent precedes its children
  std::vector<PythonSpan> python_spans;  // sorted by start; a parent precedes its children;
                                         // nested with `spans` (each op lies inside the python
                                         // spans of its stack)
};

// What is known when recording starts.
struct SessionInfo {
  uint32_t pid = 0;               // as tprof sees it (the host's, for a node agent)
  uint32_t namespace_pid = 0;     // as the process sees itself, in its container; 0: same as pid
  std::string process_name;       // /proc/PID/comm
  std::string hostname;
  std::string tprof_version;
  uint64_t attach_unix_ns = 0;    // when every probe was live
  uint64_t window_start_unix_ns = 0;
  // What Kineto's baseTimeNanoseconds rounds down: the first target's window start, so that
  // the traces of several processes recorded together share it. 0: this window's start.
  uint64_t base_time_unix_ns = 0;
  // The process's place in a distributed job (RANK and WORLD_SIZE in its environment); -1 and
  // 1 when it has none.
  int64_t rank = -1;
  int64_t world_size = 1;
  std::string torch_library;      // path of libtorch_cpu as seen in the target ("" if none)
  std::string python_version;     // "3.11.2"; "" when Python stacks were not recorded
  std::string tensor_layout;      // how TensorImpl was calibrated; "" when shapes were not recorded
  std::string gpu;                // where GPU timing comes from, or why it is unavailable; "": not asked
};

// What tprof's probes cost the target, estimated against its CPU time over the window (which
// includes the cost): the traps the kernel counted, at the costs measured in tprof's own process
// on this machine, plus the time the kernel measured tprof's BPF programs running. Where those
// were not counted, two traps (an entry and a `ret`) a range recorded.
struct ProbeCost {
  double emulated_entry_ns = 0;  // a trap on a `push`, the usual first instruction of an op
  double stepped_entry_ns = 0;   // a trap the kernel single-steps (other first instructions)
  double return_ns = 0;          // a trap on a `ret`
  double interrupt_ns = 0;       // an interrupt of the target's CPU (a stack sample's)
  double sampling_ns = 0;        // the stack sampler's interrupts on the target, estimated from its CPU time
  uint64_t ranges = 0;           // ranges recorded (ops, annotations, autograd nodes, CUDA calls)
  // Counted by the kernel over the window (BPF statistics); none where it keeps none, or where
  // several targets shared tprof's programs.
  struct Measured {
    uint64_t entry_traps = 0;
    uint64_t return_traps = 0;
    uint64_t stepped_traps = 0;  // inside functions: single-stepped, costed as stepped entries
    uint64_t bpf_run_ns = 0;
    // --max-overhead: tprof's CPU putting the per-op probes in and taking them out for each
    // window, counted as the target's (it competes for the target's CPUs).
    uint64_t moving_probes_ns = 0;
  };
  std::optional<Measured> measured;
  double estimate_ns = 0;
  uint64_t target_cpu_ns = 0;    // 0: unknown
};

// --max-overhead: the windows the per-op probes were in, and the coverage they reached.
struct OpWindows {
  double max_slowdown = 0;        // the budget: 0.05 for 5%
  uint64_t windows = 0;           // windows of ops opened
  // Probe sites: the most one window linked (the ops called so far, their returns, the node
  // classes seen), and all that were attached for windows.
  uint64_t most_sites_linked = 0;
  uint64_t sites_attached = 0;
  uint64_t exact_steps = 0;       // ProfilerSteps: whole steps a window saw (windows, without any)
  uint64_t steps_seen = 0;        // Optimizer.step calls while recording (counted in BPF)
  // The target's CPU per Optimizer.step inside windows against outside them (StepCostMeter):
  // what the windows cost the target, measured. None without enough steps on each side.
  struct StepCost {
    uint64_t steps_inside = 0;
    uint64_t steps_outside = 0;
    uint64_t cpu_inside_ns = 0;
    uint64_t cpu_outside_ns = 0;
    double excess_inside_ns = 0;     // cpu_inside less steps_inside at the outside rate
    // Stretches without steps (an evaluation, a checkpoint), on either side, left out of the
    // rates above and costed by the trap estimate.
    uint64_t cpu_in_pauses_ns = 0;
    double estimated_inside_ns = 0;  // the trap estimate of the windows' steps
    // The trap estimate of the rest: between windows (the step markers), and the pauses.
    double estimated_rest_ns = 0;
    // What the probes cost the target: the windows' steps at the larger of the measure and the
    // trap estimate, each of which misses some of it (the measure, what slows the steps between
    // windows too, such as tprof's own work on a CPU the target shares a core with; the traps,
    // what slows the target's own code while they fire).
    double cost_ns() const {
      return estimated_rest_ns + (excess_inside_ns > estimated_inside_ns ? excess_inside_ns : estimated_inside_ns);
    }
  };
  std::optional<StepCost> step_cost;
  // step_cost's cost where it is known, else probe_cost's estimate, over
  // the target's CPU time less it; none without either.
  std::optional<double> estimated_slowdown;
};

// What is known only when recording ends: the window's end and everything that was lost.
struct RunSummary {
  uint64_t window_end_unix_ns = 0;
  uint64_t dropped_records = 0;   // ring-buffer reservation failures in BPF
  uint64_t unmatched_returns = 0; // returns whose entry was never seen (op began before attach)
  uint64_t late_records = 0;      // records that arrived after the watermark had passed them
  uint64_t python_samples = 0;    // stack samples taken between ops
  uint64_t python_stacks_lost = 0;  // op and sample records that went without their stack (all
                                    // causes: the four below, no walk buffer, no room in the map)
  uint64_t ops_without_python_stack = 0;  // ATen ops written without a Call stack
  uint64_t python_thread_states_not_found = 0;  // walks that found no PyThreadState of their thread
  uint64_t python_thread_search_cut = 0;  // of those, walks that reached the thread-list search bound
  uint64_t python_stacks_not_copied = 0;  // records whose stack left the BPF map before it was copied
  uint64_t python_stacks_unresolved = 0;  // distinct stacks none of whose code objects could be read
  uint64_t arguments_lost = 0;    // op records that went without their arguments
  uint64_t python_timeline_lost = 0;  // stack observations left out of python_function spans
                                      // because a thread's backlog reached its bound
  uint64_t device_records_dropped = 0;  // GPU activity records CUPTI dropped for want of buffer space
  // Calls through torch.ops whose operator had no readable c10 name: JIT-only operators
  // (torch.ops.prim.abs), which never reach the dispatcher and which torch's profiler does not
  // record either. They have no range.
  uint64_t boxed_calls_unnamed = 0;
  bool recovered = false;         // rebuilt by `tprof recover` from a partial file
  std::optional<ProbeCost> probe_cost;  // none when the traps could not be measured
  std::optional<OpWindows> op_windows;  // --max-overhead only
  std::optional<MemorySummary> memory;  // --memory only
};

struct Trace {
  SessionInfo session;
  RunSummary summary;
  std::vector<Operator> operators;
  std::vector<PythonStack> python_stacks;  // distinct op call stacks, referenced by OpSpan
  std::vector<ThreadTrack> threads;    // main thread (tid == pid) first, then by tid
  std::vector<ForwardBackwardLink> forward_backward_links;  // by forward op start
};

// Numbers a trace's entries as the span closer does while recording: record ids from 1 in
// start order over all threads (an enclosing range before what it encloses), each thread's
// entry id just before its first range, and each range's parent_record_id from how the
// ranges of its thread enclose each other. For traces built by hand.
void number_entries(Trace& trace);

}  // namespace tprof::model
