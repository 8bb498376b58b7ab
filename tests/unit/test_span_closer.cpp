// The span closer: nesting from entry/exit records, out-of-order records within the skew bound,
// what a watermark makes final (and what it must hold back), record ids in entry order, lost and
// unwound returns, created autograd nodes and fwdbwd flows, python spans waiting for their
// thread's ops, and the per-operator totals fed from it.
#include "userspace/assemble/span_closer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "op_record.h"
#include "tests/support/recording_sink.h"
#include "userspace/cli/op_summary.h"

namespace tprof {
namespace {

using test::RecordingSink;

const MonotonicToUnix kUnixIsMonotonicPlus1000(1000);

OpEvent enter(uint64_t ns, uint32_t op) { return {ns, op, false}; }
OpEvent leave(uint64_t ns, uint32_t op) { return {ns, op, true}; }
OpEvent unwound(uint64_t ns, uint32_t op) { return {ns, op, true, false, RANGE_EXIT_UNWOUND}; }
OpEvent inferred(uint64_t ns, uint32_t op) { return {ns, op, true, false, RANGE_EXIT_INFERRED}; }
OpEvent with_counter(OpEvent event, uint64_t counter) {
  event.sequence_counter = counter;
  return event;
}

// Operators 0..9 are ops named aten::op<N>; tests append other kinds.
std::vector<model::Operator> ops_operators() {
  std::vector<model::Operator> operators;
  for (int i = 0; i < 10; ++i) operators.push_back({"aten::op" + std::to_string(i), ""});
  return operators;
}

struct Closer {
  explicit Closer(std::vector<model::Operator> table = ops_operators(), SpanCloser::StackLookup stacks = {})
      : operators(std::move(table)),
        closer(operators, std::move(stacks), kUnixIsMonotonicPlus1000, [](uint32_t tid) { return "t" + std::to_string(tid); },
               sink) {}
  void add_all(uint32_t tid, std::initializer_list<OpEvent> events) {
    for (const OpEvent& event : events) closer.add(tid, event);
  }

  std::vector<model::Operator> operators;
  RecordingSink sink;
  SpanCloser closer;
};

struct ExpectedSpan {
  uint64_t start, end;
  uint32_t op, depth;
  bool closed_at_stop = false, return_missing = false, unwound = false;
};

// `ops` as handed on, matched against `expected` in start order.
void expect_spans(std::vector<RecordingSink::Op> ops, const std::vector<ExpectedSpan>& expected) {
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.span.record_id < b.span.record_id; });
  ASSERT_EQ(ops.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("span " + std::to_string(i));
    const model::OpSpan& span = ops[i].span;
    EXPECT_EQ(span.start_ns, expected[i].start + 1000);
    EXPECT_EQ(span.end_ns, expected[i].end + 1000);
    EXPECT_EQ(span.operator_index, expected[i].op);
    EXPECT_EQ(span.depth, expected[i].depth);
    EXPECT_EQ(span.closed_at_stop, expected[i].closed_at_stop);
    EXPECT_EQ(span.return_missing, expected[i].return_missing);
    EXPECT_EQ(span.unwound, expected[i].unwound);
  }
}

std::vector<std::string> names_in_arrival_order(const RecordingSink& sink) {
  std::vector<std::string> names;
  for (const auto& op : sink.ops) names.push_back(op.name);
  return names;
}

TEST(SpanCloser, NestsCallsAndHandsOnInnerRangesFirst) {
  Closer c;
  c.add_all(7, {enter(10, 1), enter(20, 2), leave(30, 2), enter(40, 3), enter(45, 4), leave(50, 4), leave(60, 3),
                leave(70, 1)});
  c.closer.finish(100);
  expect_spans(c.sink.ops, {{10, 70, 1, 0}, {20, 30, 2, 1}, {40, 60, 3, 1}, {45, 50, 4, 2}});
  EXPECT_EQ(names_in_arrival_order(c.sink),
            (std::vector<std::string>{"aten::op2", "aten::op4", "aten::op3", "aten::op1"}));
  EXPECT_EQ(c.closer.counts().unmatched_returns, 0u);
}

OpEvent with_inputs(OpEvent event, size_t count) {
  event.has_arguments = true;
  event.arguments.resize(count);
  return event;
}

OpEvent sample_at(uint64_t ns) {
  OpEvent event;
  event.monotonic_ns = ns;
  event.is_sample = true;
  return event;
}

// What an op's spill probe read joins the entry its thread recorded just before, over other
// threads' records and a stack sample in between; anything else that came last refuses it.
TEST(SpanCloser, CompletesTheNewestEntryOfItsThreadOnly) {
  Closer c;
  const auto set_double = [](std::vector<model::Value>& inputs) { inputs.at(1).kind = model::ValueKind::kDouble; };
  c.closer.add(7, with_inputs(enter(10, 1), 2));
  c.closer.add(8, with_inputs(enter(11, 2), 2));
  c.closer.add(7, sample_at(12));
  EXPECT_TRUE(c.closer.complete_newest_entry(7, 1, set_double));
  EXPECT_FALSE(c.closer.complete_newest_entry(7, 2, set_double));  // another op's entry
  EXPECT_FALSE(c.closer.complete_newest_entry(9, 1, set_double));  // a thread with no record
  c.closer.add(8, leave(13, 2));
  EXPECT_FALSE(c.closer.complete_newest_entry(8, 2, set_double));  // its newest record is an exit
  c.closer.add(7, leave(14, 1));
  c.closer.finish(100);
  ASSERT_EQ(c.sink.ops.size(), 2u);
  for (const RecordingSink::Op& op : c.sink.ops) {
    SCOPED_TRACE(op.name);
    ASSERT_EQ(op.span.inputs.size(), 2u);
    EXPECT_EQ(op.span.inputs[1].kind, op.name == "aten::op1" ? model::ValueKind::kDouble : model::ValueKind::kUnknown);
  }
}

TEST(SpanCloser, SeparatesInterleavedThreads) {
  Closer c;
  c.closer.add(1, enter(10, 1));
  c.closer.add(2, enter(11, 2));
  c.closer.add(1, enter(12, 3));
  c.closer.add(2, leave(13, 2));
  c.closer.add(1, leave(14, 3));
  c.closer.add(2, enter(15, 4));
  c.closer.add(1, leave(16, 1));
  c.closer.add(2, leave(17, 4));
  c.closer.finish(100);
  expect_spans(c.sink.ops_of(1), {{10, 16, 1, 0}, {12, 14, 3, 1}});
  expect_spans(c.sink.ops_of(2), {{11, 13, 2, 0}, {15, 17, 4, 0}});
}

// Records from different CPUs reach the ring buffer out of timestamp order; within the skew
// bound (the watermark lags the drain) they are put back in order before anything closes.
TEST(SpanCloser, ReordersRecordsThatArriveOutOfOrderAcrossCpus) {
  Closer c;
  // Thread 3 migrated: its exit of op 2 was committed before the entry; thread 4's records
  // arrive interleaved, late ones first.
  c.add_all(3, {enter(10, 1), leave(40, 2)});
  c.add_all(4, {leave(35, 5), enter(25, 5)});
  c.add_all(3, {enter(20, 2), leave(50, 1)});
  c.closer.advance(60);
  expect_spans(c.sink.ops_of(3), {{10, 50, 1, 0}, {20, 40, 2, 1}});
  expect_spans(c.sink.ops_of(4), {{25, 35, 5, 0}});
  EXPECT_EQ(c.closer.counts().late_records, 0u);
  EXPECT_EQ(c.closer.counts().unmatched_returns, 0u);
}

// Only what precedes the watermark is processed: a record after it waits, even when it is the
// exit of a range whose entry came before.
TEST(SpanCloser, HoldsBackRecordsNewerThanTheWatermark) {
  Closer c;
  c.add_all(1, {enter(10, 1), enter(20, 2), leave(30, 2), leave(80, 1)});
  c.closer.advance(50);
  expect_spans(c.sink.ops, {{20, 30, 2, 1}});
  EXPECT_EQ(c.closer.waiting_records(), 1u);
  c.closer.advance(90);
  expect_spans(c.sink.ops, {{10, 80, 1, 0}, {20, 30, 2, 1}});
  EXPECT_EQ(c.closer.waiting_records(), 0u);
}

// An op still open when the watermark passes stays open, its children go on, and it closes at
// its exit; one still open at finish ends at the stop, flagged.
TEST(SpanCloser, KeepsAnOpOpenAcrossWatermarksUntilItsExitOrTheStop) {
  Closer c;
  c.add_all(1, {enter(10, 1), enter(20, 2), leave(30, 2)});
  c.add_all(2, {enter(15, 3)});
  c.closer.advance(100);
  expect_spans(c.sink.ops, {{20, 30, 2, 1}});
  c.add_all(1, {enter(110, 4), leave(120, 4), leave(150, 1)});
  c.closer.advance(200);
  expect_spans(c.sink.ops_of(1), {{10, 150, 1, 0}, {20, 30, 2, 1}, {110, 120, 4, 1}});
  EXPECT_TRUE(c.sink.ops_of(2).empty());
  c.closer.finish(300);
  expect_spans(c.sink.ops_of(2), {{15, 300, 3, 0, true}});
}

// A record older than a watermark already passed is still used, and counted: it may nest wrongly.
TEST(SpanCloser, CountsRecordsThatArriveAfterTheirWatermark) {
  Closer c;
  c.add_all(1, {enter(10, 1)});
  c.closer.advance(100);
  c.add_all(1, {leave(50, 1)});
  c.closer.advance(200);
  EXPECT_EQ(c.closer.counts().late_records, 1u);
  expect_spans(c.sink.ops, {{10, 50, 1, 0}});
}

TEST(SpanCloser, ClosesOpsWhoseReturnWasLostAtTheEnclosingReturn) {
  Closer c;  // op 2 and op 3 never return
  c.add_all(5, {enter(10, 1), enter(20, 2), enter(25, 3), leave(60, 1), enter(70, 4), leave(80, 4)});
  c.closer.finish(100);
  expect_spans(c.sink.ops, {{10, 60, 1, 0}, {20, 60, 2, 1, false, true}, {25, 60, 3, 2, false, true}, {70, 80, 4, 0}});
  EXPECT_EQ(names_in_arrival_order(c.sink), (std::vector<std::string>{"aten::op1", "aten::op2", "aten::op3", "aten::op4"}))
      << "ranges that end together are handed on outermost first";
}

TEST(SpanCloser, FlagsOpsEndedByAnExceptionAsUnwound) {
  // BPF closes what the exception unwound at the catch, innermost first, all at its time; the
  // enclosing op goes on and returns normally.
  Closer c;
  c.add_all(5, {enter(10, 1), enter(20, 2), enter(25, 3), unwound(40, 3), unwound(40, 2), enter(50, 4), leave(55, 4),
                leave(60, 1)});
  c.closer.finish(100);
  expect_spans(c.sink.ops, {{10, 60, 1, 0},
                            {20, 40, 2, 1, false, false, true},
                            {25, 40, 3, 2, false, false, true},
                            {50, 55, 4, 1}});
  EXPECT_EQ(c.closer.counts().unmatched_returns, 0u);
}

TEST(SpanCloser, FlagsOpsFoundGoneAsReturnMissing) {
  Closer c;  // BPF saw op 2's frame gone without its ret
  c.add_all(5, {enter(10, 1), enter(20, 2), inferred(30, 2), enter(30, 3), leave(35, 3), leave(60, 1)});
  c.closer.finish(100);
  expect_spans(c.sink.ops, {{10, 60, 1, 0}, {20, 30, 2, 1, false, true}, {30, 35, 3, 1}});
}

TEST(SpanCloser, ClosesOpsStillRunningAtStopAndCountsOrphanReturns) {
  Closer c;  // a return whose entry happened before attach, then two ops open at stop
  c.add_all(5, {leave(5, 9), enter(10, 1), enter(20, 2)});
  c.closer.finish(100);
  expect_spans(c.sink.ops, {{10, 100, 1, 0, true}, {20, 100, 2, 1, true}});
  EXPECT_EQ(c.closer.counts().unmatched_returns, 1u);
}

TEST(SpanCloser, ReturnsMatchTheInnermostOpenCallOfTheSameOp) {
  Closer c;  // recursion through the same op: the first exit closes the inner call
  c.add_all(5, {enter(10, 1), enter(20, 1), leave(30, 1), leave(40, 1)});
  c.closer.finish(100);
  expect_spans(c.sink.ops, {{10, 40, 1, 0}, {20, 30, 1, 1}});
}

// Record ids count entries process-wide in time order, as torch hands out RecordFunction
// handles; a thread is announced, with its own entry id, before its first range; the step
// annotation encloses each thread's top-level ranges.
TEST(SpanCloser, NumbersEntriesInTimeOrderAndAnnouncesThreadsFirst) {
  std::vector<model::Operator> operators = ops_operators();
  operators.push_back({"ProfilerStep#0", "", model::RangeKind::kUserAnnotation});
  Closer c(operators);
  c.closer.open_step(1, 10, 5);
  c.add_all(2, {enter(110, 2), leave(130, 2)});
  c.add_all(1, {enter(100, 0), enter(120, 1), leave(150, 1), leave(200, 0), enter(160, 1)});
  c.closer.finish(300);

  ASSERT_EQ(c.sink.threads.size(), 2u);
  EXPECT_EQ(c.sink.threads[0].tid, 1u);
  EXPECT_EQ(c.sink.threads[0].entry_id, 1u);
  EXPECT_EQ(c.sink.threads[0].name, "t1");
  EXPECT_EQ(c.sink.threads[1].tid, 2u);
  EXPECT_EQ(c.sink.threads[1].entry_id, 4u) << "announced at its first record, 110, after 100's op";

  std::map<uint64_t, std::pair<std::string, uint64_t>> by_record;  // record id -> (name, parent)
  for (const auto& op : c.sink.ops) by_record[op.span.record_id] = {op.name, op.span.parent_record_id};
  const std::map<uint64_t, std::pair<std::string, uint64_t>> expected = {
      {2, {"ProfilerStep#0", 0}},  // opened before anything else
      {3, {"aten::op0", 2}},       // 100, top level: under the step
      {5, {"aten::op2", 0}},       // 110 on thread 2, which has no step
      {6, {"aten::op1", 3}},       // 120, inside op0
      {7, {"aten::op1", 3}},       // 160, inside op0 (100..200)
  };
  EXPECT_EQ(by_record, expected);
  EXPECT_EQ(c.sink.ops.back().name, "ProfilerStep#0") << "the step closes last, at the stop";
  EXPECT_EQ(c.sink.ops.back().span.end_ns, 1300u);
}

TEST(SpanCloser, GivesCreatedNodesToTheInnermostOpThatAdvancedTheCounter) {
  // conv2d (composite) calls convolution, whose autograd kernel makes node 13 and then calls
  // _convolution below autograd; linear calls t (node 18) and addmm (node 19).
  Closer c;
  c.add_all(1, {with_counter(enter(1, 0), 13), with_counter(enter(2, 1), 13), with_counter(enter(3, 2), 14),
                with_counter(leave(4, 2), 14), with_counter(leave(5, 1), 14), with_counter(leave(6, 0), 14),
                with_counter(enter(7, 3), 18), with_counter(enter(8, 4), 18), with_counter(leave(9, 4), 19),
                with_counter(enter(10, 5), 19), with_counter(leave(11, 5), 20), with_counter(leave(12, 3), 20)});
  c.closer.finish(100);
  std::map<uint32_t, int64_t> sequence_by_op;
  for (const auto& op : c.sink.ops) sequence_by_op[op.span.operator_index] = op.span.sequence_number;
  EXPECT_EQ(sequence_by_op.at(0), -1) << "conv2d: its child made the node";
  EXPECT_EQ(sequence_by_op.at(1), 13) << "convolution";
  EXPECT_EQ(sequence_by_op.at(2), -1) << "_convolution made none";
  EXPECT_EQ(sequence_by_op.at(3), -1) << "linear: its children made both";
  EXPECT_EQ(sequence_by_op.at(4), 18) << "t";
  EXPECT_EQ(sequence_by_op.at(5), 19) << "addmm";
}

TEST(SpanCloser, NeedsTheCounterAtBothEndsToAttributeANode) {
  Closer c;
  c.add_all(1, {with_counter(enter(1, 0), UINT64_MAX), with_counter(leave(2, 0), 5)});
  c.closer.finish(100);
  EXPECT_EQ(c.sink.ops.at(0).span.sequence_number, -1);
}

OpEvent node_enter(uint64_t ns, uint32_t op, int64_t sequence_number) {
  OpEvent event = enter(ns, op);
  event.sequence_number = sequence_number;
  return event;
}

std::vector<model::Operator> autograd_operators() {
  return {{"aten::mm", "", model::RangeKind::kOperator},
          {"MmBackward0", "", model::RangeKind::kBackwardNode},
          {"autograd::engine::evaluate_function: MmBackward0", "", model::RangeKind::kBackwardEvaluate}};
}

// When the backward node closes, its fwdbwd flow goes out: from the forward op's start to the
// node's (not to evaluate_function), once.
TEST(SpanCloser, EmitsAForwardBackwardFlowWhenTheNodeCloses) {
  Closer c(autograd_operators());
  c.add_all(1, {with_counter(enter(10, 0), 7), with_counter(leave(11, 0), 8)});
  c.add_all(2, {node_enter(20, 2, 7), node_enter(21, 1, 7), leave(25, 1), leave(26, 2)});
  c.add_all(2, {node_enter(30, 2, 8), node_enter(31, 1, 8), leave(35, 1), leave(36, 2)});
  c.closer.advance(22);
  EXPECT_TRUE(c.sink.flows.empty()) << "the node is still open";
  c.closer.finish(100);
  ASSERT_EQ(c.sink.flows.size(), 1u) << "only sequence number 7 was made by an op";
  const model::ForwardBackwardFlow& flow = c.sink.flows[0];
  EXPECT_EQ(flow.id, 1u);
  EXPECT_EQ(flow.forward_tid, 1u);
  EXPECT_EQ(flow.forward_start_ns, 1010u);
  EXPECT_EQ(flow.backward_tid, 2u);
  EXPECT_EQ(flow.backward_start_ns, 1021u);
}

TEST(SpanCloser, LinksNoNodeWhoseNumberTwoOpsMade) {
  Closer c(autograd_operators());
  c.add_all(1, {with_counter(enter(10, 0), 3), with_counter(leave(11, 0), 4)});
  c.add_all(2, {with_counter(enter(15, 0), 3), with_counter(leave(16, 0), 4)});
  c.add_all(1, {node_enter(40, 1, 3), leave(41, 1)});
  c.closer.finish(100);
  EXPECT_TRUE(c.sink.flows.empty());
}

ResolvedFrame python_frame(uint64_t address, std::string function) {
  ResolvedFrame frame;
  frame.frame_address = address;
  frame.code_address = address;
  frame.file = "train.py";
  frame.function = std::move(function);
  frame.first_line = 1;
  return frame;
}

// A thread blocked at the stop (its last record the stack it blocked with) is still in those
// frames: they end with the window. The main thread's outermost frame, running at the attach,
// begins with it.
TEST(SpanCloser, FramesOfABlockedThreadLastUntilTheStopAndTheMainThreadsRootFromTheStart) {
  const StoredStack waiting{{python_frame(0x20, "sleepy"), python_frame(0x10, "<module>")}, {}};
  Closer c(ops_operators(), [&](uint64_t id) -> const StoredStack* { return id == 1 ? &waiting : nullptr; });
  c.closer.open_step(7, 0, 5);
  c.closer.thread_running_since(7, 5);
  OpEvent blocked{.monotonic_ns = 40, .is_sample = true, .python_stack_id = 1};
  blocked.blocked = true;
  c.closer.add(7, blocked);
  c.closer.finish(100);
  ASSERT_EQ(c.sink.python_spans.size(), 2u);
  for (const auto& span : c.sink.python_spans) {
    SCOPED_TRACE(span.span.name);
    EXPECT_EQ(span.span.end_ns, 1100u) << "open until the stop";
    EXPECT_EQ(span.span.start_ns, span.span.depth == 0 ? 1005u : 1040u);
  }
  // The same sample not blocked: the frames end where they were last seen.
  Closer running(ops_operators(), [&](uint64_t id) -> const StoredStack* { return id == 1 ? &waiting : nullptr; });
  blocked.blocked = false;
  running.closer.add(7, blocked);
  running.closer.finish(100);
  ASSERT_EQ(running.sink.python_spans.size(), 2u);
  EXPECT_EQ(running.sink.python_spans[0].span.end_ns, 1040u);
}

// An op's stack observation needs the op's end, so a thread's observations wait until its
// outermost op closes; a sample between ops goes through at once. Ops carry their stack.
TEST(SpanCloser, FeedsPythonSpansOnceTheThreadsOutermostOpCloses) {
  const StoredStack in_step{{python_frame(0x20, "step"), python_frame(0x10, "main")}, {{"train.py", 3, "step"}, {"train.py", 9, "main"}}};
  const StoredStack in_loss{{python_frame(0x30, "loss"), python_frame(0x10, "main")}, {{"train.py", 5, "loss"}, {"train.py", 9, "main"}}};
  Closer c(ops_operators(), [&](uint64_t id) -> const StoredStack* {
    return id == 1 ? &in_step : id == 2 ? &in_loss : nullptr;
  });
  OpEvent outer = enter(10, 1);
  outer.python_stack_id = 1;
  OpEvent inner = enter(20, 2);
  inner.python_stack_id = 1;
  OpEvent sample{.monotonic_ns = 60, .is_sample = true, .python_stack_id = 2};
  c.add_all(1, {outer, inner, leave(30, 2)});
  c.closer.advance(40);
  EXPECT_TRUE(c.sink.python_spans.empty()) << "op 1 is still open: its end bounds the spans";
  c.add_all(1, {leave(50, 1), sample});
  c.closer.advance(70);
  ASSERT_EQ(c.sink.python_spans.size(), 1u) << "the sample at 60 shows step gone";
  EXPECT_EQ(c.sink.python_spans[0].span.name, "train.py(1): step");
  EXPECT_EQ(c.sink.python_spans[0].span.start_ns, 1010u);
  EXPECT_EQ(c.sink.python_spans[0].span.end_ns, 1050u);
  c.closer.finish(100);
  ASSERT_EQ(c.sink.python_spans.size(), 3u);
  EXPECT_EQ(c.sink.python_spans[1].span.name, "train.py(1): main") << "closing together, outermost first";
  EXPECT_EQ(c.sink.python_spans[1].span.end_ns, 1060u);
  EXPECT_EQ(c.sink.python_spans[2].span.name, "train.py(1): loss");
  ASSERT_EQ(c.sink.ops.size(), 2u);
  EXPECT_EQ(c.sink.ops[0].stack, in_step.printable);
}

// Operators 0..9 as ops_operators(), then ProfilerStep#0 (10) and Optimizer.step#SGD.step (11).
std::vector<model::Operator> step_operators() {
  std::vector<model::Operator> operators = ops_operators();
  operators.push_back({"ProfilerStep#0", "", model::RangeKind::kUserAnnotation});
  operators.push_back({"Optimizer.step#SGD.step", "", model::RangeKind::kUserAnnotation});
  return operators;
}

// A range of operator `range_operator` opened with stack `entering`, then one op inside it run
// with stack `inside`, both closed: each python_function span's (start, end), by its function's
// name.
std::map<std::string, std::pair<uint64_t, uint64_t>> spans_around_a_range(std::vector<model::Operator> operators,
                                                                          uint32_t range_operator,
                                                                          const StoredStack& entering,
                                                                          const StoredStack& inside) {
  Closer c(std::move(operators), [&](uint64_t id) -> const StoredStack* {
    return id == 1 ? &entering : id == 2 ? &inside : nullptr;
  });
  OpEvent range = enter(10, range_operator);
  range.python_stack_id = 1;
  OpEvent op = enter(20, 1);
  op.python_stack_id = 2;
  c.add_all(1, {range, op, leave(30, 1), leave(40, range_operator)});
  c.closer.finish(100);
  std::map<std::string, std::pair<uint64_t, uint64_t>> spans;
  for (const auto& python : c.sink.python_spans) {
    const std::string& name = python.span.name;
    spans[name.substr(name.find(": ") + 2)] = {python.span.start_ns, python.span.end_ns};
  }
  return spans;
}

// A record_function range's stack is taken inside record_function.__enter__, which returns
// before the range's ops run: the frames the ops run in (the optimizer's own) get their spans,
// and only __enter__'s callers last the range, so that their spans still enclose it.
TEST(SpanCloser, ARecordFunctionRangesStackIsOneLookNotTheRangesStack) {
  const StoredStack entering{{python_frame(0x40, "__enter__"), python_frame(0x20, "step"), python_frame(0x10, "main")}, {}};
  ResolvedFrame sgd = python_frame(0x40, "sgd");  // __enter__'s frame slot, reused by another code
  sgd.code_address = 0x50;
  const StoredStack in_sgd{{sgd, python_frame(0x20, "step"), python_frame(0x10, "main")}, {}};
  std::map<std::string, std::pair<uint64_t, uint64_t>> spans =
      spans_around_a_range(step_operators(), 11, entering, in_sgd);
  EXPECT_FALSE(spans.contains("__enter__")) << "it returned before the range's ops ran";
  ASSERT_TRUE(spans.contains("sgd")) << "the op's own frame has its span";
  EXPECT_EQ(spans["sgd"], std::make_pair(uint64_t{1020}, uint64_t{1030}));
  EXPECT_EQ(spans["step"], std::make_pair(uint64_t{1010}, uint64_t{1040})) << "it encloses the whole range";
}

// A wait counter's stack is taken in its guard's __enter__, which is C++: from contextlib's
// ExitStack.enter_context (torch 2.6's compile_inner), which returns at once, only its callers
// last the range.
TEST(SpanCloser, AWaitCounterEnteredThroughAnExitStackIsLastedByItsCallers) {
  std::vector<model::Operator> operators = ops_operators();
  operators.push_back({"pytorch.wait_counter.dynamo_compile", "", model::RangeKind::kWaitCounter});  // 10
  const StoredStack entering{
      {python_frame(0x40, "enter_context"), python_frame(0x20, "compile_inner"), python_frame(0x10, "main")}, {}};
  ResolvedFrame trace = python_frame(0x40, "_compile_inner");  // enter_context's frame slot, reused
  trace.code_address = 0x50;
  const StoredStack in_trace{{trace, python_frame(0x20, "compile_inner"), python_frame(0x10, "main")}, {}};
  std::map<std::string, std::pair<uint64_t, uint64_t>> spans =
      spans_around_a_range(operators, 10, entering, in_trace);
  EXPECT_FALSE(spans.contains("enter_context")) << "it returned before the range's ops ran";
  EXPECT_EQ(spans["_compile_inner"], std::make_pair(uint64_t{1020}, uint64_t{1030}));
  EXPECT_EQ(spans["compile_inner"], std::make_pair(uint64_t{1010}, uint64_t{1040})) << "it encloses the whole range";
}

// torch 2.6's dynamo_timed enters record_function inside a @contextmanager generator, itself
// entered through ExitStack.enter_context: the generator, the context manager's __enter__ and
// enter_context all return at once; only compile_inner and its callers last the range.
TEST(SpanCloser, ARangeEnteredInsideAContextManagerGeneratorIsLastedByTheWithsFrame) {
  const StoredStack entering{{python_frame(0x50, "__call__"), python_frame(0x48, "__enter__"),
                              python_frame(0x40, "dynamo_timed"), python_frame(0x38, "__enter__"),
                              python_frame(0x30, "enter_context"), python_frame(0x20, "compile_inner"),
                              python_frame(0x10, "main")},
                             {}};
  ResolvedFrame trace = python_frame(0x30, "_compile_inner");  // enter_context's frame slot, reused
  trace.code_address = 0x60;
  const StoredStack in_trace{{trace, python_frame(0x20, "compile_inner"), python_frame(0x10, "main")}, {}};
  std::map<std::string, std::pair<uint64_t, uint64_t>> spans =
      spans_around_a_range(step_operators(), 11, entering, in_trace);
  for (const char* returned : {"__call__", "__enter__", "dynamo_timed", "enter_context"})
    EXPECT_FALSE(spans.contains(returned)) << returned << " returned before the range's ops ran";
  EXPECT_EQ(spans["_compile_inner"], std::make_pair(uint64_t{1020}, uint64_t{1030}));
  EXPECT_EQ(spans["compile_inner"], std::make_pair(uint64_t{1010}, uint64_t{1040})) << "it encloses the whole range";
}

// Steps as the session detects them: each Optimizer.step ends one; ProfilerStep#N operators
// are appended to the table as they are needed; the boundary's caller frames are all but its
// innermost (`compare_stacks`), or not compared.
// Steps ended by Optimizer.step, each ProfilerStep#N named as it begins (appended to the table).
SpanCloser::StepDetection optimizer_step_detection(Closer& c) {
  return {.is_boundary = [](const model::Operator& op) { return op.name.starts_with("Optimizer.step#"); },
          .step_operator =
              [&c](uint64_t step_number) {
                c.operators.push_back(
                    {"ProfilerStep#" + std::to_string(step_number), "", model::RangeKind::kUserAnnotation});
                return static_cast<uint32_t>(c.operators.size() - 1);
              },
          .boundary_caller_frames = nullptr};
}

// With `compare_stacks`, the boundary's caller's frames tell whether an iteration ended.
size_t all_but_innermost(const ResolvedStack& boundary) { return boundary.size() - 1; }

void detect_optimizer_steps(Closer& c, bool compare_stacks) {
  SpanCloser::StepDetection detection = optimizer_step_detection(c);
  if (compare_stacks) detection.boundary_caller_frames = all_but_innermost;
  c.closer.detect_steps(std::move(detection));
  c.closer.open_step(1, 10, 5);
}

OpEvent with_stack(OpEvent event, uint64_t stack) {
  event.python_stack_id = stack;
  return event;
}

// The ProfilerStep ranges handed on, by name.
std::map<std::string, model::OpSpan> steps_of(const RecordingSink& sink) {
  std::map<std::string, model::OpSpan> steps;
  for (const auto& op : sink.ops)
    if (op.name.starts_with("ProfilerStep#")) steps[op.name] = op.span;
  return steps;
}

// --step-function: each new invocation of the named function begins a step, the first one
// keeping step 0 when nothing ran in it yet; repeated looks at one invocation do not.
TEST(SpanCloser, EachNewInvocationOfTheStepFunctionBeginsAStep) {
  const ResolvedFrame main = python_frame(0x10, "main");
  ResolvedFrame call = python_frame(0x20, "train_step");
  const StoredStack first_call{{call, main}, {}};
  ResolvedFrame later_in_call = call;
  later_in_call.instruction = 8;
  const StoredStack first_call_later{{later_in_call, main}, {}};
  ResolvedFrame main_moved = main;
  main_moved.instruction = 4;  // the caller moved on: the slot now holds another call
  const StoredStack second_call{{call, main_moved}, {}};
  // The loop around the calls returns, then another loop (a second epoch) calls it again.
  const StoredStack after_loop{{python_frame(0x11, "evaluate")}, {}};
  const StoredStack next_epoch{{call, python_frame(0x12, "epoch")}, {}};
  const std::vector<const StoredStack*> stacks = {nullptr,      &first_call, &first_call_later, &second_call,
                                                  &after_loop, &next_epoch};
  std::vector<model::Operator> operators = ops_operators();
  for (int step = 0; step < 4; ++step)
    operators.push_back({"ProfilerStep#" + std::to_string(step), "", model::RangeKind::kUserAnnotation});
  Closer c(operators, [&](uint64_t id) { return id < stacks.size() ? stacks[id] : nullptr; });
  c.closer.detect_steps({.is_boundary = [](const model::Operator&) { return false; },
                         .step_operator = [](uint64_t step) { return static_cast<uint32_t>(10 + step); },
                         .boundary_caller_frames = [](const ResolvedStack& stack) { return stack.size(); },
                         .is_step_frame = [](const ResolvedFrame& frame) { return frame.function == "train_step"; }});
  c.closer.open_step(1, 10, 0);
  c.add_all(1, {with_stack(enter(10, 1), 1), leave(20, 1), with_stack(enter(30, 1), 2), leave(40, 1),
                with_stack(enter(50, 1), 3), leave(60, 1), with_stack(enter(70, 1), 4), leave(75, 1),
                with_stack(enter(80, 1), 5), leave(90, 1)});
  c.closer.finish(100);
  std::map<std::string, model::OpSpan> steps = steps_of(c.sink);
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_LT(steps["ProfilerStep#0"].start_ns, steps["ProfilerStep#1"].start_ns) << "the first call keeps step 0";
  EXPECT_EQ(steps["ProfilerStep#1"].start_ns, 1050u) << "the second call begins step 1";
  EXPECT_EQ(steps["ProfilerStep#2"].start_ns, 1070u) << "what runs after the loop is no call's step";
  EXPECT_EQ(steps["ProfilerStep#3"].start_ns, 1080u) << "the next epoch's first call begins a step";
}

// Iterations: Optimizer.step ends one, and the next top-level op begins ProfilerStep#N+1, its
// ops under it. The first step starts with the thread's first op, the last ends with its last.
TEST(SpanCloser, EachOptimizerStepEndsAnIterationAtTheNextTopLevelOp) {
  Closer c(step_operators());
  detect_optimizer_steps(c, /*compare_stacks=*/false);
  c.add_all(1, {enter(100, 0), leave(110, 0), enter(120, 11), enter(125, 1), leave(130, 1), leave(140, 11),
                enter(200, 0), leave(210, 0), enter(220, 11), leave(230, 11)});
  c.closer.finish(300);

  std::map<std::string, model::OpSpan> steps = steps_of(c.sink);
  std::map<uint64_t, std::string> names;
  for (const auto& op : c.sink.ops) names[op.span.record_id] = op.name;
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps["ProfilerStep#0"].start_ns, 1100u) << "the thread's first op";
  EXPECT_EQ(steps["ProfilerStep#0"].end_ns, 1200u) << "the next iteration's first op";
  EXPECT_EQ(steps["ProfilerStep#1"].start_ns, 1200u);
  EXPECT_EQ(steps["ProfilerStep#1"].end_ns, 1230u) << "the last activity, not the stop";
  EXPECT_EQ(c.closer.counts().steps, 2u);
  for (const auto& op : c.sink.ops) {
    if (op.span.depth != 0 || op.name.starts_with("ProfilerStep#")) continue;
    EXPECT_EQ(names[op.span.parent_record_id], op.span.start_ns < 1200 ? "ProfilerStep#0" : "ProfilerStep#1")
        << op.name << " at " << op.span.start_ns;
  }
}

// With stacks, what the optimizer's caller does after the step stays in the iteration; a sample
// of the next call begins the next step; a step begun with no op after the last iteration is
// dropped.
TEST(SpanCloser, AStepBeginsWhereTheOptimizersCallerWasCalledAgain) {
  const std::vector<symbolizer::BackwardJump> no_loops;
  auto at = [&](ResolvedFrame frame, uint32_t instruction) {
    frame.instruction = instruction;
    frame.loops = &no_loops;
    return frame;
  };
  const ResolvedFrame main = python_frame(0x10, "main");
  const ResolvedFrame step = python_frame(0x20, "train_step");
  const StoredStack optimizer_call{{python_frame(0x30, "wrapper"), at(step, 30), at(main, 8)}, {}};
  const StoredStack step_tail{{at(step, 34), at(main, 8)}, {}};
  const StoredStack next_call{{at(step, 2), at(main, 8)}, {}};
  const StoredStack after_loop{{python_frame(0x40, "save"), at(main, 12)}, {}};
  const std::vector<const StoredStack*> stacks = {nullptr, &optimizer_call, &step_tail, &next_call, &after_loop};
  Closer c(step_operators(), [&](uint64_t id) { return id < stacks.size() ? stacks[id] : nullptr; });
  detect_optimizer_steps(c, /*compare_stacks=*/true);
  c.add_all(1, {with_stack(enter(100, 0), 3), leave(110, 0), with_stack(enter(120, 11), 1), leave(140, 11),
                with_stack(enter(150, 2), 2), leave(160, 2),                     // loss.item() after the step
                OpEvent{.monotonic_ns = 190, .is_sample = true, .python_stack_id = 3},  // the next call, before its op
                with_stack(enter(200, 0), 3), leave(210, 0), with_stack(enter(220, 11), 1), leave(230, 11),
                OpEvent{.monotonic_ns = 260, .is_sample = true, .python_stack_id = 4}});  // after the loop: no op
  c.closer.finish(300);
  std::map<std::string, model::OpSpan> steps = steps_of(c.sink);
  ASSERT_EQ(steps.size(), 2u) << "the step after the loop ran no op";
  EXPECT_EQ(steps["ProfilerStep#0"].end_ns, 1190u) << "at the sample of the next call, after loss.item()";
  EXPECT_EQ(steps["ProfilerStep#1"].start_ns, 1190u);
  EXPECT_EQ(steps["ProfilerStep#1"].end_ns, 1230u) << "its own last activity, not the sample after the loop";
}

// The first step opens before the loop's own function is first seen (a sample in main):
// once the first iteration ends, it starts inside that function's span, so the two nest.
TEST(SpanCloser, TheFirstStepStartsInsideFramesFirstSeenAfterIt) {
  const std::vector<symbolizer::BackwardJump> no_loops;
  auto at = [&](ResolvedFrame frame, uint32_t instruction) {
    frame.instruction = instruction;
    frame.loops = &no_loops;
    return frame;
  };
  const ResolvedFrame main = python_frame(0x10, "main");
  const ResolvedFrame loop = python_frame(0x18, "run_loop");
  const ResolvedFrame step = python_frame(0x20, "train_step");
  const StoredStack main_only{{at(main, 4)}, {}};
  const StoredStack first_op{{at(step, 2), at(loop, 6), at(main, 8)}, {}};
  const StoredStack optimizer_call{{python_frame(0x30, "wrapper"), at(step, 30), at(loop, 6), at(main, 8)}, {}};
  const std::vector<const StoredStack*> stacks = {nullptr, &main_only, &first_op, &optimizer_call};
  Closer c(step_operators(), [&](uint64_t id) { return id < stacks.size() ? stacks[id] : nullptr; });
  detect_optimizer_steps(c, /*compare_stacks=*/true);
  c.add_all(1, {OpEvent{.monotonic_ns = 50, .is_sample = true, .python_stack_id = 1}, with_stack(enter(100, 0), 2),
                leave(110, 0), with_stack(enter(120, 11), 3), leave(140, 11), with_stack(enter(200, 0), 2),
                leave(210, 0)});
  c.closer.finish(300);
  std::map<std::string, model::OpSpan> steps = steps_of(c.sink);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps["ProfilerStep#0"].start_ns, 1100u) << "where run_loop was first seen, not at the sample in main";
  EXPECT_EQ(steps["ProfilerStep#0"].end_ns, 1200u);
}

// Frames at an instruction of code whose loops are known: the functions named in `looping` loop
// from instruction 6 to 10 (<module>, from 20 to 40), the others have no loop.
struct LoopingCode {
  std::vector<std::string> looping;
  std::vector<symbolizer::BackwardJump> loop = {{.from = 10, .to = 6}};
  std::vector<symbolizer::BackwardJump> module_loop = {{.from = 40, .to = 20}};
  std::vector<symbolizer::BackwardJump> none;
  ResolvedFrame at(ResolvedFrame frame, uint32_t instruction) const {
    frame.instruction = instruction;
    const bool loops = std::find(looping.begin(), looping.end(), frame.function) != looping.end();
    frame.loops = !loops ? &none : frame.function == "<module>" ? &module_loop : &loop;
    return frame;
  }
};

// As the session detects steps: the edges' parts of iterations under their own annotations, and
// the thread running since the window's start (the initial step with it).
void detect_optimizer_steps_and_partial_ones(Closer& c) {
  detect_optimizer_steps(c, /*compare_stacks=*/true);
  c.operators.push_back({"Partial step: before", "", model::RangeKind::kUserAnnotation});
  c.operators.push_back({"Partial step: after", "", model::RangeKind::kUserAnnotation});
  const auto before = static_cast<uint32_t>(c.operators.size() - 2);
  SpanCloser::StepDetection detection = optimizer_step_detection(c);
  detection.boundary_caller_frames = all_but_innermost;
  detection.partial_step_operator = [before](SpanCloser::PartialStep part) {
    return part == SpanCloser::PartialStep::kBeforeFirstBoundary ? before : before + 1;
  };
  c.closer.detect_steps(std::move(detection));
  c.closer.thread_running_since(1, 5);
}

// Every range the sink got, by name (the last of a name wins).
std::map<std::string, model::OpSpan> ranges_by_name(const RecordingSink& sink) {
  std::map<std::string, model::OpSpan> ranges;
  for (const auto& op : sink.ops) ranges[op.name] = op.span;
  return ranges;
}

// tprof attached inside a running training loop and stopped inside another iteration: the
// first iteration began before the window (every frame of it was already running), the last
// did not reach its optimizer step. Neither is a ProfilerStep (on a 5-step CNN, step 0 began
// up to 101 ms before its first op and TensorBoard's average step was 4 times torch's).
TEST(SpanCloser, AttachedInsideARunningLoopTheIterationsAtTheEdgesArePartialSteps) {
  const LoopingCode code{.looping = {"main"}};  // for ...: train_step()
  auto at = [&](const ResolvedFrame& frame, uint32_t instruction) { return code.at(frame, instruction); };
  const ResolvedFrame main = python_frame(0x10, "main");
  const ResolvedFrame step = python_frame(0x20, "train_step");
  const StoredStack optimizer_call{{python_frame(0x30, "wrapper"), at(step, 30), at(main, 8)}, {}};
  const StoredStack call{{at(step, 2), at(main, 8)}, {}};
  const std::vector<const StoredStack*> stacks = {nullptr, &optimizer_call, &call};
  Closer c(step_operators(), [&](uint64_t id) { return id < stacks.size() ? stacks[id] : nullptr; });
  detect_optimizer_steps_and_partial_ones(c);
  c.add_all(1, {with_stack(enter(100, 0), 2), leave(110, 0), with_stack(enter(120, 11), 1), leave(140, 11),
                OpEvent{.monotonic_ns = 190, .is_sample = true, .python_stack_id = 2},  // the next call
                with_stack(enter(200, 0), 2), leave(210, 0), with_stack(enter(220, 11), 1), leave(230, 11),
                OpEvent{.monotonic_ns = 240, .is_sample = true, .python_stack_id = 2},  // and the next
                with_stack(enter(250, 0), 2), leave(260, 0)});                          // stopped in it
  c.closer.finish(300);
  std::map<std::string, model::OpSpan> ranges = ranges_by_name(c.sink);
  ASSERT_TRUE(ranges.contains("Partial step: before"));
  EXPECT_EQ(ranges["Partial step: before"].start_ns, 1005u) << "the window's start";
  EXPECT_EQ(ranges["Partial step: before"].end_ns, 1190u);
  ASSERT_TRUE(ranges.contains("ProfilerStep#1"));
  EXPECT_EQ(ranges["ProfilerStep#1"].start_ns, 1190u);
  EXPECT_EQ(ranges["ProfilerStep#1"].end_ns, 1240u);
  ASSERT_TRUE(ranges.contains("Partial step: after"));
  EXPECT_EQ(ranges["Partial step: after"].start_ns, 1240u);
  EXPECT_EQ(steps_of(c.sink).size(), 1u) << "the one whole iteration";
  EXPECT_EQ(c.closer.counts().steps, 1u);
  EXPECT_EQ(c.closer.counts().partial_steps, 2u);
}

// The loop's function began inside the recording (tprof record, or an attach before the loop):
// its first iteration is a whole ProfilerStep#0, and one that ended with its optimizer step
// before the stop is whole too.
TEST(SpanCloser, WhenTheLoopBeginsInsideTheRecordingItsFirstIterationIsAWholeStep) {
  const LoopingCode code{.looping = {"main", "run_loop"}};
  auto at = [&](const ResolvedFrame& frame, uint32_t instruction) { return code.at(frame, instruction); };
  const ResolvedFrame main = python_frame(0x10, "main");
  const ResolvedFrame loop = python_frame(0x18, "run_loop");
  const ResolvedFrame step = python_frame(0x20, "train_step");
  const StoredStack main_only{{at(main, 4)}, {}};
  const StoredStack first_op{{at(step, 2), at(loop, 6), at(main, 8)}, {}};
  const StoredStack optimizer_call{{python_frame(0x30, "wrapper"), at(step, 30), at(loop, 6), at(main, 8)}, {}};
  const std::vector<const StoredStack*> stacks = {nullptr, &main_only, &first_op, &optimizer_call};
  Closer c(step_operators(), [&](uint64_t id) { return id < stacks.size() ? stacks[id] : nullptr; });
  detect_optimizer_steps_and_partial_ones(c);
  c.add_all(1, {OpEvent{.monotonic_ns = 50, .is_sample = true, .python_stack_id = 1}, with_stack(enter(100, 0), 2),
                leave(110, 0), with_stack(enter(120, 11), 3), leave(140, 11), with_stack(enter(200, 0), 2),
                leave(210, 0), with_stack(enter(220, 11), 3), leave(230, 11)});
  c.closer.finish(300);
  std::map<std::string, model::OpSpan> steps = steps_of(c.sink);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps["ProfilerStep#0"].start_ns, 1100u) << "where run_loop was first seen";
  EXPECT_EQ(steps["ProfilerStep#1"].end_ns, 1230u) << "its optimizer step's end: its last activity";
  EXPECT_EQ(c.closer.counts().partial_steps, 0u);
}

// A loop in the frame that was running at the first stack seen (a script's <module> held at its
// import of torch by tprof record) began inside the recording when that stack was before it.
TEST(SpanCloser, ALoopInTheFirstFrameSeenBeganInsideTheRecordingWhenThatFrameWasBeforeIt) {
  const LoopingCode code{.looping = {"<module>"}};
  auto at = [&](const ResolvedFrame& frame, uint32_t instruction) { return code.at(frame, instruction); };
  const ResolvedFrame module = python_frame(0x10, "<module>");
  const StoredStack importing{{python_frame(0x50, "_find_and_load"), at(module, 4)}, {}};
  const StoredStack first_op{{at(module, 24)}, {}};
  const StoredStack optimizer_call{{python_frame(0x30, "wrapper"), at(module, 30)}, {}};
  const std::vector<const StoredStack*> stacks = {nullptr, &importing, &first_op, &optimizer_call};
  Closer c(step_operators(), [&](uint64_t id) { return id < stacks.size() ? stacks[id] : nullptr; });
  detect_optimizer_steps_and_partial_ones(c);
  c.add_all(1, {OpEvent{.monotonic_ns = 50, .is_sample = true, .python_stack_id = 1}, with_stack(enter(100, 0), 2),
                leave(110, 0), with_stack(enter(120, 11), 3), leave(140, 11), with_stack(enter(200, 0), 2),
                leave(210, 0), with_stack(enter(220, 11), 3), leave(230, 11)});
  c.closer.finish(300);
  EXPECT_EQ(steps_of(c.sink).size(), 2u);
  EXPECT_EQ(c.closer.counts().partial_steps, 0u);
}

// A script's loop at module level, then a sleep after it: the frame never returns, but it has
// run past its loop, and the last step ends with the last iteration's activity, not the sleep's
// (on an H100 the last ProfilerStep of such a script ran 1,003 ms, its 1 s sleep included).
TEST(SpanCloser, WhatAModuleLevelLoopsFrameRunsAfterTheLoopIsNoStep) {
  const LoopingCode code{.looping = {"<module>"}};
  auto at = [&](const ResolvedFrame& frame, uint32_t instruction) { return code.at(frame, instruction); };
  const ResolvedFrame module = python_frame(0x10, "<module>");
  const StoredStack first_op{{at(module, 24)}, {}};
  const StoredStack optimizer_call{{python_frame(0x30, "wrapper"), at(module, 30)}, {}};
  const StoredStack sleeping{{python_frame(0x60, "sleep"), at(module, 48)}, {}};
  const std::vector<const StoredStack*> stacks = {nullptr, &first_op, &optimizer_call, &sleeping};
  Closer c(step_operators(), [&](uint64_t id) { return id < stacks.size() ? stacks[id] : nullptr; });
  detect_optimizer_steps(c, /*compare_stacks=*/true);
  c.add_all(1, {with_stack(enter(100, 0), 1), leave(110, 0), with_stack(enter(120, 11), 2), leave(140, 11),
                with_stack(enter(200, 0), 1), leave(210, 0), with_stack(enter(220, 11), 2), leave(230, 11),
                OpEvent{.monotonic_ns = 250, .is_sample = true, .python_stack_id = 3},
                OpEvent{.monotonic_ns = 900, .is_sample = true, .python_stack_id = 3}});
  c.closer.finish(1000);
  std::map<std::string, model::OpSpan> steps = steps_of(c.sink);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps["ProfilerStep#1"].end_ns, 1230u) << "its optimizer step's end, not the sleep's";
}

// Every ATen op without a stack is counted, walked or not; a stack id the store does not know
// is counted as not copied, for ops and samples alike. Other ranges may lack a stack.
OpEvent window_edge(uint64_t ns, OpWindowEdge edge) {
  OpEvent event;
  event.monotonic_ns = ns;
  event.window_edge = edge;
  return event;
}

OpEvent optimizer_step(uint64_t ns, uint32_t steps_so_far) {
  OpEvent event = enter(ns, 11);
  event.optimizer_steps = steps_so_far;
  return event;
}

// As --max-overhead sets the closer up: steps at Optimizer.step, the windows' edges' partial
// steps under their own annotations, steps on thread 1.
void record_ops_in_windows(Closer& c) {
  c.operators.push_back({"Partial step: window start", "", model::RangeKind::kUserAnnotation});
  c.operators.push_back({"Partial step: window end", "", model::RangeKind::kUserAnnotation});
  const auto window_start = static_cast<uint32_t>(c.operators.size() - 2);
  SpanCloser::StepDetection detection = optimizer_step_detection(c);
  detection.partial_step_operator = [window_start](SpanCloser::PartialStep part) {
    return part == SpanCloser::PartialStep::kWindowStart ? window_start : window_start + 1;
  };
  c.closer.detect_steps(std::move(detection));
  c.closer.record_ops_in_windows(1);
}

// --max-overhead: the ops' probes are in only between window edges. A window's whole steps are
// ProfilerSteps numbered by the optimizer steps counted in BPF (those between windows too);
// the part before its first boundary and the step its close cuts are partial; ranges open at
// the close end there; what arrives between windows (the probes going in or out) is dropped.
TEST(SpanCloser, InWindowsOfOpsOnlyWholeStepsAreProfilerStepsWithTheirRealNumbers) {
  Closer c(step_operators());
  record_ops_in_windows(c);
  c.closer.add(0, window_edge(100, OpWindowEdge::kOpened));
  c.add_all(1, {enter(50, 2), leave(60, 2),  // before the window: the probes going in
                enter(110, 1), leave(120, 1), optimizer_step(130, 41), leave(140, 11),  // the 41st step's end
                enter(200, 0), enter(205, 3), leave(210, 3), leave(220, 0), optimizer_step(230, 42), leave(240, 11),
                enter(300, 0), enter(305, 3)});  // still running at the close
  c.closer.add(0, window_edge(310, OpWindowEdge::kClosing));
  c.add_all(1, {leave(320, 3), leave(330, 0), enter(340, 4)});  // the probes going out
  c.closer.add(0, window_edge(400, OpWindowEdge::kOpened));
  c.add_all(1, {enter(410, 1), leave(420, 1), optimizer_step(430, 97), leave(440, 11), enter(500, 0), leave(510, 0)});
  c.closer.add(0, window_edge(520, OpWindowEdge::kClosing));
  c.closer.finish(600);

  std::map<std::string, int> steps;
  for (const auto& op : c.sink.ops)
    if (op.name.starts_with("ProfilerStep#") || op.name.starts_with("Partial step")) ++steps[op.name];
  EXPECT_EQ(steps, (std::map<std::string, int>{{"Partial step: window end", 2},
                                               {"Partial step: window start", 2},
                                               {"ProfilerStep#41", 1}}));
  const std::map<std::string, model::OpSpan> ranges = ranges_by_name(c.sink);
  EXPECT_EQ(ranges.at("ProfilerStep#41").start_ns, 1200u) << "the first op after the 41st step";
  EXPECT_EQ(ranges.at("ProfilerStep#41").end_ns, 1300u) << "the first op after the 42nd";
  EXPECT_EQ(c.closer.counts().steps, 1u);
  EXPECT_EQ(c.closer.counts().exact_steps_ended, 1u);
  EXPECT_EQ(c.closer.counts().partial_steps, 4u);
  EXPECT_EQ(c.closer.counts().op_windows, 2u);
  EXPECT_EQ(c.closer.counts().outside_windows, 5u);
  EXPECT_FALSE(ranges.contains("aten::op2")) << "recorded while the probes went in";
  EXPECT_FALSE(ranges.contains("aten::op4")) << "recorded while the probes went out";
  const model::OpSpan& cut = ranges.at("aten::op3");
  EXPECT_EQ(cut.start_ns, 1305u);
  EXPECT_EQ(cut.end_ns, 1310u) << "ended at the window's close";
  EXPECT_TRUE(cut.closed_at_stop);
  for (const auto& op : c.sink.ops)
    EXPECT_TRUE(op.span.start_ns < 1310 || op.span.start_ns >= 1400) << op.name << " between windows";
  // What ran before the second window's first boundary belongs to no step a schedule counts.
  for (const auto& op : c.sink.ops)
    if (op.span.start_ns >= 1400 && op.span.start_ns < 1440) {
      EXPECT_EQ(op.span.step, model::OpSpan::kNoStep) << op.name;
    }
  EXPECT_EQ(ranges_by_name(c.sink).at("aten::op0").step, 97u) << "the last op0, after the 97th step";
}

// A window opened after Optimizer.step calls were counted (but none seen in a window) knows
// that steps exist: what it holds before its first boundary is a partial step, not a window's
// ProfilerStep#K.
TEST(SpanCloser, AWindowOpenedAfterCountedStepsBeginsWithAPartialStep) {
  Closer c(step_operators());
  record_ops_in_windows(c);
  OpEvent opened = window_edge(100, OpWindowEdge::kOpened);
  opened.optimizer_steps = 7;
  c.closer.add(0, std::move(opened));
  c.add_all(1, {enter(110, 1), leave(120, 1), optimizer_step(130, 8), leave(140, 11), enter(200, 0), leave(210, 0),
                optimizer_step(230, 9), leave(240, 11), enter(300, 0), leave(310, 0)});
  c.closer.add(0, window_edge(350, OpWindowEdge::kClosing));
  c.closer.finish(400);

  std::vector<std::string> steps;
  for (const auto& op : c.sink.ops)
    if (op.name.starts_with("ProfilerStep#") || op.name.starts_with("Partial step")) steps.push_back(op.name);
  EXPECT_EQ(steps, (std::vector<std::string>{"Partial step: window start", "ProfilerStep#8", "Partial step: window end"}));
  EXPECT_EQ(ranges_by_name(c.sink).at("aten::op1").step, model::OpSpan::kNoStep);
}

// Without any Optimizer.step, each window is the step, as ProfilerStep#0 covers a plain
// recording without one: ProfilerStep#K for window K. Once a boundary shows up, the window it
// ends is only part of an iteration.
TEST(SpanCloser, WithoutBoundariesEachWindowOfOpsIsAStep) {
  Closer c(step_operators());
  record_ops_in_windows(c);
  c.closer.add(0, window_edge(100, OpWindowEdge::kOpened));
  c.add_all(1, {enter(110, 1), leave(120, 1)});
  c.closer.add(0, window_edge(150, OpWindowEdge::kClosing));
  c.closer.add(0, window_edge(200, OpWindowEdge::kOpened));
  c.add_all(1, {enter(210, 1), leave(220, 1), optimizer_step(230, 1), leave(240, 11), enter(300, 2), leave(310, 2)});
  c.closer.add(0, window_edge(350, OpWindowEdge::kClosing));
  c.closer.finish(400);

  std::vector<std::string> steps;
  for (const auto& op : c.sink.ops)
    if (op.name.starts_with("ProfilerStep#") || op.name.starts_with("Partial step")) steps.push_back(op.name);
  EXPECT_EQ(steps, (std::vector<std::string>{"ProfilerStep#0", "Partial step: window start",
                                             "Partial step: window end"}));
  const std::map<std::string, model::OpSpan> ranges = ranges_by_name(c.sink);
  EXPECT_EQ(ranges.at("ProfilerStep#0").start_ns, 1100u);
  EXPECT_EQ(ranges.at("ProfilerStep#0").end_ns, 1150u) << "the window's close";
  EXPECT_EQ(c.closer.counts().steps, 1u);
  EXPECT_EQ(c.closer.counts().exact_steps_ended, 0u);
}

TEST(SpanCloser, CountsOpsWithoutTheirPythonStack) {
  std::vector<model::Operator> operators = ops_operators();
  operators.push_back({"## step ##", "", model::RangeKind::kUserAnnotation});
  const StoredStack known{{python_frame(0x20, "step")}, {{"train.py", 3, "step"}}};
  Closer c(operators, [&](uint64_t id) -> const StoredStack* { return id == 1 ? &known : nullptr; });
  OpEvent with_stack = enter(10, 1);
  with_stack.python_stack_id = 1;
  OpEvent lost_stack = enter(30, 2);
  lost_stack.python_stack_id = 2;
  OpEvent lost_sample{.monotonic_ns = 60, .is_sample = true, .python_stack_id = 3};
  c.add_all(1, {with_stack, leave(20, 1), lost_stack, leave(40, 2), enter(41, 3), leave(42, 3), enter(43, 10),
                leave(44, 10), lost_sample});
  c.closer.finish(100);
  EXPECT_EQ(c.closer.counts().ops_without_python_stack, 2u) << "op 2 (stack lost) and op 3 (none walked)";
  EXPECT_EQ(c.closer.counts().stacks_not_copied, 2u) << "op 2's stack and the sample's";
}

OpEvent memory_event(uint64_t ns, uint64_t address, uint64_t bytes) {
  OpEvent event{ns};
  event.is_memory = true;
  event.memory_address = address;
  event.memory_bytes = bytes;
  return event;
}
OpEvent allocated(uint64_t ns, uint64_t address, uint64_t bytes) { return memory_event(ns, address, bytes); }
OpEvent freed(uint64_t ns, uint64_t address) { return memory_event(ns, address, 0); }

TEST(SpanCloser, MemoryCountsTowardsEveryRangeOpenOnItsThreadAndTheInnermostsSelf) {
  Closer c;
  c.closer.track_memory();
  c.add_all(1, {allocated(50, 0x9000, 64), enter(100, 0), allocated(110, 0x1000, 1000), enter(120, 1),
                allocated(130, 0x2000, 400), leave(150, 1), freed(160, 0x1000), leave(200, 0), freed(210, 0x2000),
                freed(220, 0x7777)});
  c.add_all(2, {enter(115, 2), allocated(125, 0x3000, 8), leave(135, 2)});
  c.closer.advance(UINT64_MAX);
  ASSERT_EQ(c.sink.ops.size(), 3u);
  std::map<uint32_t, model::OpSpan> by_operator;
  for (const auto& op : c.sink.ops) by_operator[op.span.operator_index] = op.span;
  EXPECT_EQ(by_operator[0].cpu_memory_bytes, 400) << "1000 + 400 allocated, 1000 freed inside it";
  EXPECT_EQ(by_operator[0].self_cpu_memory_bytes, 0);
  EXPECT_EQ(by_operator[1].cpu_memory_bytes, 400);
  EXPECT_EQ(by_operator[1].self_cpu_memory_bytes, 400);
  EXPECT_EQ(by_operator[2].cpu_memory_bytes, 8) << "another thread's allocations are not op 0's";

  const auto& events = c.sink.memory_events;
  ASSERT_EQ(events.size(), 6u) << "the free of a block never seen allocated is left out";
  const std::vector<int64_t> bytes = {64, 1000, 8, 400, -1000, -400};
  const std::vector<int64_t> totals = {64, 1064, 1072, 1472, 472, 72};
  const std::vector<uint64_t> enclosing = {0, by_operator[0].record_id, by_operator[2].record_id,
                                           by_operator[1].record_id, by_operator[0].record_id, 0};
  for (size_t i = 0; i < events.size(); ++i) {
    SCOPED_TRACE("event " + std::to_string(i));
    EXPECT_EQ(events[i].bytes, bytes[i]);
    EXPECT_EQ(events[i].total_allocated, totals[i]);
    EXPECT_EQ(events[i].external_id, enclosing[i]);
    EXPECT_EQ(events[i].device_type, 0);
    EXPECT_EQ(events[i].device_index, -1);
  }
  EXPECT_EQ(events[1].time_ns, 1110u);
  EXPECT_EQ(events[1].address, 0x1000u);

  const auto summary = c.closer.memory_summary();
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->allocations, 4u);
  EXPECT_EQ(summary->frees, 2u);
  EXPECT_EQ(summary->frees_of_unknown_blocks, 1u);
  EXPECT_EQ(summary->peak_allocated_bytes, 1472);
  EXPECT_EQ(summary->allocated_at_end, 72);
  ASSERT_EQ(summary->peak_holders.size(), 4u);
  EXPECT_EQ(summary->peak_holders[0].op, "aten::op0");
  EXPECT_EQ(summary->peak_holders[0].bytes, 1000);
  EXPECT_EQ(summary->peak_holders[1].op, "aten::op1");
  EXPECT_EQ(summary->peak_holders[3].op, "aten::op2");
  EXPECT_EQ(summary->peak_holders[2].op, "") << "64 bytes allocated outside every range";
}

TEST(SpanCloser, WithoutTrackMemoryNoMemoryIsKept) {
  Closer c;
  c.add_all(1, {enter(100, 0), allocated(110, 0x1000, 1000), leave(200, 0)});
  c.closer.finish(300);
  EXPECT_TRUE(c.sink.memory_events.empty());
  EXPECT_FALSE(c.closer.memory_summary());
  EXPECT_EQ(c.sink.ops.at(0).span.cpu_memory_bytes, 0);
}

TEST(OperatorTotals, MemoryColumnsAndTheMemoryRowAsTorchPrintsThem) {
  OperatorTotalsTable table;
  table.show_memory();
  table.add("aten::empty", "", 1'000, 1'000, 0, {.cpu = 3 << 20, .self_cpu = 3 << 20});
  table.add("aten::empty", "", 1'000, 1'000, 0, {.cpu = -(1 << 19), .self_cpu = -(1 << 19)});
  table.add_unattributed_memory(-2048, false);
  const std::string text =
      format_summary_table(table, {.sort = "self_cpu_memory_usage", .row_limit = 10, .group_by_shape = false});
  EXPECT_NE(text.find("CPU time avg       CPU Mem  Self CPU Mem    # of Calls"), std::string::npos) << text;
  EXPECT_NE(text.find("2.50 Mb       2.50 Mb             2"), std::string::npos) << text;
  EXPECT_NE(text.find("-2.00 Kb      -2.00 Kb             1"), std::string::npos) << text;
  const auto rows = table.rows({.sort = "self_cpu_memory_usage", .row_limit = 10, .group_by_shape = false});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "aten::empty");
  EXPECT_EQ(rows[1].name, "[memory]");
  EXPECT_TRUE(is_summary_sort_key("cpu_memory_usage"));
  EXPECT_EQ(format_memory(512), "512 b");
  EXPECT_EQ(format_memory(-1536), "-1.50 Kb");
  EXPECT_EQ(format_memory(int64_t{3} << 30), "3.00 Gb");
  EXPECT_EQ(text.find("CUDA Mem"), std::string::npos) << "no device memory: no CUDA columns";
  table.show_device_memory();
  table.add("aten::empty", "", 1'000, 1'000, 0, {.device = 1 << 20, .self_device = 1 << 20});
  const std::string with_device =
      format_summary_table(table, {.sort = "cuda_memory_usage", .row_limit = 1, .group_by_shape = false});
  EXPECT_NE(with_device.find("Self CPU Mem      CUDA Mem  Self CUDA Mem    # of Calls"), std::string::npos)
      << with_device;
  EXPECT_NE(with_device.find("1.00 Mb        1.00 Mb             3"), std::string::npos) << with_device;
}

TEST(SpanCloser, DeviceMemoryKeepsItsAllocatorsSizesAndTotals) {
  Closer c;
  c.closer.track_memory();
  OpEvent malloc_event = allocated(110, 0x7f0000000000, 2 << 20);
  malloc_event.memory_device_type = 1;
  malloc_event.memory_device_index = 0;
  malloc_event.memory_total_allocated = 2 << 20;
  malloc_event.memory_total_reserved = 20 << 20;
  OpEvent free_event = malloc_event;
  free_event.monotonic_ns = 130;
  free_event.memory_bytes = -(2 << 20);
  free_event.memory_total_allocated = 0;
  c.add_all(1, {enter(100, 0), malloc_event, leave(120, 0), free_event});
  c.closer.finish(300);
  ASSERT_EQ(c.sink.memory_events.size(), 2u);
  EXPECT_EQ(c.sink.memory_events[0].device_type, 1);
  EXPECT_EQ(c.sink.memory_events[0].device_index, 0);
  EXPECT_EQ(c.sink.memory_events[0].bytes, 2 << 20);
  EXPECT_EQ(c.sink.memory_events[0].total_reserved, 20 << 20);
  EXPECT_EQ(c.sink.memory_events[1].bytes, -(2 << 20)) << "a device's free comes sized";
  EXPECT_EQ(c.sink.memory_events[1].external_id, 0u);
  EXPECT_EQ(c.sink.ops.at(0).span.device_memory_bytes, 2 << 20);
  EXPECT_EQ(c.sink.ops.at(0).span.cpu_memory_bytes, 0);
  const auto summary = c.closer.memory_summary();
  EXPECT_EQ(summary->device_events, 2u);
  EXPECT_EQ(summary->device_peak_allocated_bytes, 2 << 20);
  EXPECT_EQ(summary->allocations, 0u) << "the CPU's counts hold CPU blocks only";
}

TEST(OperatorTotals, SubtractChildrenFromSelfTime) {
  std::vector<model::Operator> operators = {{"aten::a", ""}, {"aten::b", ""}};
  Closer c(operators);
  c.add_all(1, {enter(100, 0), enter(120, 1), leave(150, 1), enter(160, 1), leave(170, 1), leave(200, 0)});
  c.add_all(2, {enter(110, 0), leave(130, 0)});
  c.closer.finish(300);
  OperatorTotalsSink totals;
  for (const auto& op : c.sink.ops) totals.op({op.tid, op.span, operators.at(op.span.operator_index), nullptr});
  const auto rows = totals.table().rows({});
  ASSERT_EQ(rows.size(), 2u);
  // aten::a: 100 on thread 1 minus its children (30 + 10 of aten::b) = 60; plus 20 on thread 2.
  EXPECT_EQ(rows[0].name, "aten::a");
  EXPECT_EQ(rows[0].calls, 2u);
  EXPECT_EQ(rows[0].self_ns, 80u);
  EXPECT_EQ(rows[0].total_ns, 120u);
  EXPECT_EQ(rows[1].name, "aten::b");
  EXPECT_EQ(rows[1].calls, 2u);
  EXPECT_EQ(rows[1].self_ns, 40u);
}

}  // namespace
}  // namespace tprof
