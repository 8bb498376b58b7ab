// Turns the op tracer's entry and exit records into final ranges as recording goes, and hands
// each on to a sink once nothing that arrives later can change it.
//
// Records reach userspace out of timestamp order: each CPU reserves its ring-buffer slot after
// taking its timestamp. add() takes them in any order; advance(watermark) processes, in
// timestamp order across all threads, every record at or before the watermark, which the
// caller sets to the drain time minus a bound on that skew. Processing is a per-thread call
// stack: an entry opens a range and takes the next record id (process-wide, in entry order, as
// torch hands out RecordFunction handles), an exit closes it and everything it encloses, and a
// closed range goes to the sink at once. Python stack observations wait until their thread has
// no op open (an op's observation needs its end), then feed that thread's python timeline. A
// forward op is remembered by the autograd node it created until a backward node with that
// number closes, which emits their fwdbwd flow. Memory is bounded by what is open and by the
// records inside the watermark's lag, not by the length of the recording.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/trace_model.h"
#include "model/trace_sink.h"
#include "userspace/assemble/memory_tracker.h"
#include "userspace/assemble/python_stack_store.h"
#include "userspace/assemble/python_timeline.h"
#include "userspace/assemble/wall_clock.h"

namespace tprof {

// --max-overhead: where a window of per-op probes began (all linked) or ends (about to be removed).
enum class OpWindowEdge : uint8_t { kNone, kOpened, kClosing };

// An entry or exit of a range (an op, an annotation or an autograd node), a stack sample, or a
// window edge (only monotonic_ns counts).
struct OpEvent {
  uint64_t monotonic_ns = 0;
  uint32_t op_id = 0;            // index of its model::Operator
  bool is_exit = false;
  bool is_sample = false;        // a stack sample: only monotonic_ns and python_stack_id count
  uint8_t exit_cause = 0;        // exits: enum range_exit_cause (bpf/op_record.h)
  uint64_t python_stack_id = 0;  // entries and samples; 0: none
  bool has_arguments = false;    // entries: inputs were captured; exits: returns were
  std::vector<model::Value> arguments;
  int64_t sequence_number = -1;  // entries of autograd nodes
  uint64_t forward_thread = 0;
  // Op entries and exits: the thread's autograd sequence counter; SEQUENCE_COUNTER_UNKNOWN
  // (all ones) when not read.
  uint64_t sequence_counter = UINT64_MAX;
  bool blocked = false;  // samples: its thread went off CPU here, in this stack until it runs again
  // Annotation entries: the Optimizer.step annotations named in the process since tprof came,
  // this one included; 0: not counted. A window's opening edge: those named so far.
  uint32_t optimizer_steps = 0;
  OpWindowEdge window_edge = OpWindowEdge::kNone;
  // --memory: a block allocated (memory_bytes > 0, with its thread's python_stack_id) or freed.
  // The CPU's frees come with memory_bytes 0, sized by the closer's MemoryLedger; a device's
  // with their negative size and the device's totals as its allocator counts them.
  bool is_memory = false;
  uint64_t memory_address = 0;
  int64_t memory_bytes = 0;
  uint64_t memory_total_allocated = 0;
  uint64_t memory_total_reserved = 0;
  int8_t memory_device_type = 0;    // c10::DeviceType: CPU 0
  int8_t memory_device_index = -1;
};

class SpanCloser {
 public:
  // Stack observations waiting for their thread's outermost op to close, over all threads
  // (32 bytes each). Past this a thread's observations are dropped, and counted, until its
  // outermost op closes: its python spans then miss that stretch.
  static constexpr size_t kMaxWaitingObservations = 2'000'000;
  // Forward ops remembered until the backward node they created runs (a few dozen bytes each).
  static constexpr size_t kMaxRememberedForwardOps = 1'000'000;

  struct Counts {
    uint64_t ops = 0;               // ranges handed on
    uint64_t python_spans = 0;
    uint64_t threads = 0;
    uint64_t steps = 0;             // ProfilerStep ranges handed on
    uint64_t partial_steps = 0;     // parts of iterations at the window's edges handed on
    uint64_t op_windows = 0;        // ops in windows: windows opened
    uint64_t exact_steps_ended = 0; // ops in windows: ProfilerSteps ended (handed on a little later)
    uint64_t outside_windows = 0;   // ops in windows: range records between windows, dropped
    uint64_t unmatched_returns = 0; // exits whose entry was never seen
    uint64_t late_records = 0;      // records older than a watermark already passed
    uint64_t python_timeline_lost = 0;
    uint64_t ops_without_python_stack = 0;  // ATen ops handed on without a stack, Python stacks on
    uint64_t stacks_not_copied = 0;         // records whose stack id find_stack did not know
  };

  // Finds a stored Python stack by id; null if unknown. What it returns must stay valid.
  using StackLookup = std::function<const StoredStack*(uint64_t stack_id)>;

  // `operators` must outlive the closer; the table may grow while recording. `find_stack` is
  // empty without Python stacks. `thread_name` names a thread when it is announced.
  SpanCloser(const std::vector<model::Operator>& operators, StackLookup find_stack, MonotonicToUnix clock,
             std::function<std::string(uint32_t tid)> thread_name, model::TraceSink& sink);

  void add(uint32_t tid, OpEvent event);  // records in any order
  // Whether `op_id` names an operator of the table (as it grows): an event of any other is refused.
  bool knows_operator(uint32_t op_id) const { return op_id < operators_.size(); }
  // Hands `complete` the arguments of `tid`'s newest record (stack samples aside) when it is an
  // entry of op `op_id` with arguments, not yet processed; false otherwise. For values a later
  // probe in the same call read, which arrive right after their entry (one thread's records
  // keep their order).
  bool complete_newest_entry(uint32_t tid, uint32_t op_id,
                             const std::function<void(std::vector<model::Value>&)>& complete);
  // The same for the newest record whether entry or exit: `complete` gets its inputs or its
  // returns, and whether they are the returns.
  bool complete_newest_record(uint32_t tid, uint32_t op_id,
                              const std::function<void(std::vector<model::Value>&, bool returns)>& complete);
  // The range that top-level ranges of `tid` nest in until finish(), or until step detection
  // ends it, such as ProfilerStep#0 from the window's start; it takes its record id now.
  void open_step(uint32_t tid, uint32_t operator_index, uint64_t start_monotonic_ns);
  // `tid` (the main thread) ran before `start_monotonic_ns`: the outermost frame it is first seen
  // in (its <module>) was already running then, and so was its initial step. Call after
  // open_step.
  void thread_running_since(uint32_t tid, uint64_t start_monotonic_ns);

  // Iterations, as torch.profiler's ProfilerStep#N: once a range that `is_boundary` accepts
  // (an Optimizer.step annotation) has closed on a thread, the next top-level range that
  // thread enters (or stack sample between ranges) ends the current step and begins step N+1
  // (`step_operator(N + 1)` names it) on that thread. Beginning at the next top-level entry, not at the boundary's return, keeps
  // steps around whole top-level ranges and Python frames. The last step ends at finish().
  //
  // With Python stacks, "the next top-level range" is refined: one whose stack is still in the
  // boundary's iteration (same_iteration, comparing the boundary stack's outermost
  // `boundary_caller_frames(stack)` frames) stays in the current step, so that what the
  // caller of Optimizer.step does after it (and a second optimizer's step) stays in it.
  //
  // A ProfilerStep is a whole iteration. With `partial_step_operator`, the parts of iterations
  // at the window's edges are written under its names instead, and are no ProfilerStep:
  // - before the first boundary, when the window began inside the loop (tprof attached to a
  //   running loop): the loop around the first boundary (driving_loop_depth) was already
  //   looping in the thread's first stack seen;
  // - after the last boundary, when the recording stopped inside an iteration (its ops ran, its
  //   boundary did not).
  // A recording without any boundary keeps its one ProfilerStep#0 over the window.
  //
  // With `is_step_frame` (--step-function), a step is an invocation of that Python function
  // instead: each new one, first seen at a top-level range's entry or a sample between ranges,
  // begins the next step, and `is_boundary` is not asked (nor are the edges told apart).
  enum class PartialStep { kBeforeFirstBoundary, kAfterLastBoundary, kWindowStart, kWindowEnd };
  struct StepDetection {
    std::function<bool(const model::Operator& op)> is_boundary;
    std::function<uint32_t(uint64_t step_number)> step_operator;
    std::function<size_t(const ResolvedStack& boundary)> boundary_caller_frames;
    std::function<bool(const ResolvedFrame& frame)> is_step_frame = {};
    std::function<uint32_t(PartialStep part)> partial_step_operator = {};
  };
  void detect_steps(StepDetection detection) { step_detection_ = std::move(detection); }

  // --max-overhead: the probes that fire at every op are in only for windows, told as they
  // open and close by window_edge events (add(), any tid) in the records' time order. Instead
  // of open_step, after detect_steps. Only whole steps a window saw from the boundary that
  // began them to the next step's beginning are ProfilerSteps, numbered by the boundary's
  // optimizer_steps (steps between windows are counted in BPF, not seen). What a window holds
  // before its first step is a kWindowStart partial step on `step_tid`, where steps are, and
  // the step a window's close cuts is a kWindowEnd one. While no boundary was ever seen, each
  // window is one ProfilerStep#K, K the window's number from 0 (as ProfilerStep#0 covers a
  // plain recording without boundaries). Ranges still open at a close end
  // there, flagged closed_at_stop (CUDA calls, whose probes stay, run on). Records of ranges
  // between windows, which the probes made while going in or out, are dropped and counted.
  // No python spans are made: frames run on across a window's edges, where its partial steps
  // begin and end, and would cross them (the ops keep their stacks).
  void record_ops_in_windows(uint32_t step_tid) {
    ops_in_windows_ = true;
    ops_window_open_ = false;
    step_thread_ = step_tid;
  }

  // --memory: memory records become [memory] events in time order (MemoryTracker); each goes to
  // the sink as it comes and counts towards the CPU (or device) memory of every range open on its
  // thread, and the self memory of the innermost, as torch's legacy profiler counts it.
  void track_memory() { memory_.emplace(operators_); }
  // What the allocators did so far, the peak's holders named; with `cycle_start_unix_ns`, also
  // the CPU blocks still live that were allocated before it. None without track_memory().
  std::optional<model::MemorySummary> memory_summary(std::optional<uint64_t> cycle_start_unix_ns = std::nullopt) const;

  // Estimates an op's FLOPs from its inputs at entry (0: none), as with_flops does.
  using FlopsEstimator = std::function<uint64_t(const model::Operator& op, const std::vector<model::Value>& inputs)>;
  void estimate_flops(FlopsEstimator estimator) { flops_estimator_ = std::move(estimator); }
  // Processes every record at or before `watermark_monotonic_ns`.
  void advance(uint64_t watermark_monotonic_ns);
  // Processes everything left; ranges still open end at `stop_monotonic_ns`, flagged
  // closed_at_stop, and every python span and step closes.
  void finish(uint64_t stop_monotonic_ns);

  // Called with every range as it is handed on (the GPU correlator keeps recent ones).
  void on_range_closed(std::function<void(uint32_t tid, const model::OpSpan& span)> observer) {
    range_observer_ = std::move(observer);
  }
  // The record id of the innermost range open on `tid` that began at or before `unix_ns`,
  // steps included; 0: none.
  uint64_t innermost_open_range(uint32_t tid, uint64_t unix_ns) const;

  const Counts& counts() const { return counts_; }
  size_t waiting_records() const { return inbox_.size(); }

 private:
  bool complete_newest(uint32_t tid, uint32_t op_id, bool exits_too,
                       const std::function<void(std::vector<model::Value>&, bool returns)>& complete);

  struct Pending {
    uint32_t tid;
    uint64_t arrival;  // keeps one thread's records at equal timestamps in their order
    OpEvent event;
  };
  struct SequenceRange {
    uint64_t first;
    uint64_t end;  // exclusive
  };
  struct OpenRange {
    model::OpSpan span;
    const StoredStack* stack = nullptr;
    uint64_t counter_at_entry = UINT64_MAX;
    std::vector<SequenceRange> made_by_children;  // nodes its finished children created
    size_t observation = SIZE_MAX;                // its entry in the thread's waiting observations
    bool partial_step = false;                    // a step range that is only part of an iteration
    uint32_t optimizer_steps = 0;                 // of its entry (OpEvent)
    bool window_step = false;  // a window of ops as the step, no boundary known when it opened
  };
  struct ThreadState {
    ThreadState(uint32_t thread_id, PythonSpanNamer& namer) : tid(thread_id), timeline(namer) {}
    uint32_t tid;
    std::vector<OpenRange> open;
    std::vector<StackObservation> observations;  // waiting for the outermost op to close
    bool dropping_observations = false;
    PythonTimeline timeline;
    std::vector<OpenRange> steps;  // open_step ranges, closed at finish or the next step
    bool step_boundary_passed = false;  // a boundary closed: the next top-level entry begins a step
    const StoredStack* boundary_stack = nullptr;  // that boundary's Python stack; null: none
    uint32_t boundary_optimizer_steps = 0;        // and its count of Optimizer.step annotations
    const StoredStack* first_stack = nullptr;     // the thread's first stack seen, at an op or sample
    bool step_start_pending = false;  // the initial step starts at the thread's first activity
    uint64_t last_activity_ns = 0;    // the end of its last op or sample
    // The stack its thread blocked with, when nothing was recorded of it since: its frames are
    // still open when recording stops.
    const StoredStack* blocked_stack = nullptr;
    bool ranges_in_step = false;      // a top-level range entered since its step began
  };
  struct ForwardOp {
    uint32_t tid;
    uint64_t start_ns;
    bool ambiguous;  // a second op claimed the same sequence number
  };

  ThreadState& thread(uint32_t tid);
  void process(uint32_t tid, OpEvent& event);
  void enter(ThreadState& thread, OpEvent& event);
  void exit(ThreadState& thread, OpEvent& event);
  void sample(ThreadState& thread, const OpEvent& event);
  void memory(ThreadState& thread, const OpEvent& event);
  OpenRange* innermost_range(ThreadState& thread);
  const StoredStack* find_stack(uint64_t stack_id);
  void close_ranges_down_to(ThreadState& thread, size_t depth, uint64_t counter_at_exit);
  void hand_on(uint32_t tid, const OpenRange& range);
  void link_forward_backward(uint32_t tid, const model::OpSpan& span);
  void forget_old_forward_ops(uint64_t now_ns);
  void observe_range_start(ThreadState& thread, OpenRange& range);
  const ResolvedStack* lasting_frames(const StoredStack& stack, model::RangeKind kind);
  void observe(ThreadState& thread, const StackObservation& observation, size_t* index);
  void flush_observations(ThreadState& thread);
  void emit_python_span(uint32_t tid, const model::PythonSpan& span);
  void begin_next_step(ThreadState& thread, uint64_t start_ns, const StoredStack* stack);
  void end_steps(ThreadState& thread, uint64_t end_ns);
  void mark_partial(OpenRange& step, PartialStep part);
  bool first_iteration_began_before_window(const ThreadState& thread) const;
  void hand_on_step(uint32_t tid, OpenRange& step);
  void hold_ended_steps(ThreadState& thread, uint64_t end_ns);
  void hand_on_held_step();
  bool iteration_ended(const ThreadState& thread, const StoredStack* stack) const;
  void begin_step_if_iteration_ended(ThreadState& thread, uint64_t at_ns, const StoredStack* stack);
  void begin_step_at_new_invocation(ThreadState& thread, uint64_t at_ns, const StoredStack* stack);
  void note_activity(ThreadState& thread, uint64_t at_ns);
  void window_edge(OpWindowEdge edge, uint64_t at_ns, uint32_t optimizer_steps);
  void open_ops_window(uint64_t at_ns, uint32_t optimizer_steps);
  void close_ops_window(uint64_t at_ns);
  bool outside_windows(const OpEvent& event) const;
  bool recorded_all_along(uint32_t operator_index) const;

  const std::vector<model::Operator>& operators_;
  StackLookup find_stack_;
  MonotonicToUnix clock_;
  std::function<std::string(uint32_t)> thread_name_;
  model::TraceSink& sink_;
  std::function<void(uint32_t, const model::OpSpan&)> range_observer_;
  std::optional<StepDetection> step_detection_;
  bool ops_in_windows_ = false;  // record_ops_in_windows
  bool ops_window_open_ = true;
  bool boundary_seen_ = false;   // some step boundary closed, or was counted before a window
  FlopsEstimator flops_estimator_;
  std::optional<MemoryTracker> memory_;  // track_memory()
  uint32_t step_thread_ = 0;       // the thread whose steps are open (the one that trains)
  struct HeldStep {
    uint32_t tid;
    OpenRange step;
    uint64_t last_activity_ns;  // its thread's last activity before the next step began
  };
  std::optional<HeldStep> held_step_;  // ended, waiting to see whether the next step is one
  uint64_t last_step_number_ = 0;  // the N of the open ProfilerStep#N
  // In a window of ops until its first boundary: ranges belong to no numbered step (kNoStep).
  bool before_windows_first_boundary_ = false;
  // --step-function: the last stack that showed the step function, its thread, and the step
  // function's depth there (from the outermost frame).
  struct StepFrame {
    uint32_t tid;
    const StoredStack* stack;
    size_t depth;
  };
  std::optional<StepFrame> last_step_frame_;

  struct ReadyKey {
    uint64_t time_ns;
    uint64_t arrival;
    size_t index;  // into inbox_
  };

  std::vector<Pending> inbox_;
  std::vector<ReadyKey> ready_;  // reused by every advance()
  uint64_t next_arrival_ = 0;
  uint64_t watermark_ns_ = 0;
  uint64_t next_entry_id_ = 1;  // record ids and thread entry ids
  uint64_t next_flow_id_ = 1;
  size_t waiting_observations_ = 0;
  PythonSpanNamer namer_;
  std::unordered_map<uint32_t, ThreadState> threads_;
  std::unordered_map<int64_t, ForwardOp> forward_ops_;  // by the sequence number they created
  // Per stored stack of a record_function or wait counter range, its frames outside those that
  // entered it (lasting_frames; as many as the store's stacks at most; the map's nodes keep them
  // where the timeline points).
  std::unordered_map<const StoredStack*, ResolvedStack> enter_callers_;
  Counts counts_;
};

}  // namespace tprof
