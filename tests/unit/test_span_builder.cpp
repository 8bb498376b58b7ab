// Span reconstruction from entry/exit records: nesting, interleaved threads, lost returns,
// records that arrive out of order from different CPUs, and record-id assignment.
#include <gtest/gtest.h>

#include "op_record.h"
#include "userspace/op_summary.h"
#include "userspace/span_builder.h"

namespace tprof {
namespace {

const MonotonicToUnix kUnixIsMonotonicPlus1000(1000);

OpEvent enter(uint64_t ns, uint32_t op) { return {ns, op, false}; }
OpEvent leave(uint64_t ns, uint32_t op) { return {ns, op, true}; }
OpEvent unwound(uint64_t ns, uint32_t op) { return {ns, op, true, RANGE_EXIT_UNWOUND}; }
OpEvent inferred(uint64_t ns, uint32_t op) { return {ns, op, true, RANGE_EXIT_INFERRED}; }

struct ExpectedSpan {
  uint64_t start, end;
  uint32_t op, depth;
  bool closed_at_stop = false, return_missing = false, unwound = false;
};

void expect_spans(const model::ThreadTrack& track, const std::vector<ExpectedSpan>& expected) {
  ASSERT_EQ(track.spans.size(), expected.size()) << "tid " << track.tid;
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE("span " + std::to_string(i));
    const model::OpSpan& span = track.spans[i];
    EXPECT_EQ(span.start_ns, expected[i].start + 1000);
    EXPECT_EQ(span.end_ns, expected[i].end + 1000);
    EXPECT_EQ(span.operator_index, expected[i].op);
    EXPECT_EQ(span.depth, expected[i].depth);
    EXPECT_EQ(span.closed_at_stop, expected[i].closed_at_stop);
    EXPECT_EQ(span.return_missing, expected[i].return_missing);
    EXPECT_EQ(span.unwound, expected[i].unwound);
  }
}

TEST(SpanBuilder, NestsCallsAndKeepsParentsFirst) {
  SpanBuilder builder;
  for (const OpEvent& e : {enter(10, 1), enter(20, 2), leave(30, 2), enter(40, 3), enter(45, 4), leave(50, 4),
                           leave(60, 3), leave(70, 1)})
    builder.add(7, e);
  const BuiltThreads built = std::move(builder).build(100, kUnixIsMonotonicPlus1000);
  ASSERT_EQ(built.threads.size(), 1u);
  expect_spans(built.threads[0], {{10, 70, 1, 0}, {20, 30, 2, 1}, {40, 60, 3, 1}, {45, 50, 4, 2}});
  EXPECT_EQ(built.unmatched_returns, 0u);
}

TEST(SpanBuilder, SeparatesInterleavedThreads) {
  SpanBuilder builder;
  builder.add(1, enter(10, 1));
  builder.add(2, enter(11, 2));
  builder.add(1, enter(12, 3));
  builder.add(2, leave(13, 2));
  builder.add(1, leave(14, 3));
  builder.add(2, enter(15, 4));
  builder.add(1, leave(16, 1));
  builder.add(2, leave(17, 4));
  const BuiltThreads built = std::move(builder).build(100, kUnixIsMonotonicPlus1000);
  ASSERT_EQ(built.threads.size(), 2u);
  EXPECT_EQ(built.threads[0].tid, 1u);
  expect_spans(built.threads[0], {{10, 16, 1, 0}, {12, 14, 3, 1}});
  EXPECT_EQ(built.threads[1].tid, 2u);
  expect_spans(built.threads[1], {{11, 13, 2, 0}, {15, 17, 4, 0}});
}

TEST(SpanBuilder, ReordersRecordsThatArriveOutOfOrder) {
  // A thread that migrated between CPUs can have its records committed out of order.
  SpanBuilder builder;
  for (const OpEvent& e : {enter(10, 1), leave(40, 2), enter(20, 2), leave(50, 1)}) builder.add(3, e);
  const BuiltThreads built = std::move(builder).build(100, kUnixIsMonotonicPlus1000);
  expect_spans(built.threads[0], {{10, 50, 1, 0}, {20, 40, 2, 1}});
}

TEST(SpanBuilder, ClosesOpsWhoseReturnWasLostAtTheEnclosingReturn) {
  // op 2 and op 3 never return (e.g. an exception unwound through them).
  SpanBuilder builder;
  for (const OpEvent& e : {enter(10, 1), enter(20, 2), enter(25, 3), leave(60, 1), enter(70, 4), leave(80, 4)})
    builder.add(5, e);
  const BuiltThreads built = std::move(builder).build(100, kUnixIsMonotonicPlus1000);
  expect_spans(built.threads[0], {{10, 60, 1, 0},
                                  {20, 60, 2, 1, false, true},
                                  {25, 60, 3, 2, false, true},
                                  {70, 80, 4, 0}});
}

TEST(SpanBuilder, FlagsOpsEndedByAnExceptionAsUnwound) {
  // BPF closes what the exception unwound at the catch, innermost first, all at its time; the
  // enclosing op goes on and returns normally.
  SpanBuilder builder;
  for (const OpEvent& e : {enter(10, 1), enter(20, 2), enter(25, 3), unwound(40, 3), unwound(40, 2), enter(50, 4),
                           leave(55, 4), leave(60, 1)})
    builder.add(5, e);
  const BuiltThreads built = std::move(builder).build(100, kUnixIsMonotonicPlus1000);
  expect_spans(built.threads[0], {{10, 60, 1, 0},
                                  {20, 40, 2, 1, false, false, true},
                                  {25, 40, 3, 2, false, false, true},
                                  {50, 55, 4, 1}});
  EXPECT_EQ(built.unmatched_returns, 0u);
}

TEST(SpanBuilder, FlagsOpsFoundGoneAsReturnMissing) {
  // BPF saw op 2's frame gone (a later entry at or above its stack pointer) without its ret.
  SpanBuilder builder;
  for (const OpEvent& e : {enter(10, 1), enter(20, 2), inferred(30, 2), enter(30, 3), leave(35, 3), leave(60, 1)})
    builder.add(5, e);
  const BuiltThreads built = std::move(builder).build(100, kUnixIsMonotonicPlus1000);
  expect_spans(built.threads[0], {{10, 60, 1, 0}, {20, 30, 2, 1, false, true}, {30, 35, 3, 1}});
}

TEST(SpanBuilder, ClosesOpsStillRunningAtStopAndCountsOrphanReturns) {
  SpanBuilder builder;
  // A return whose entry happened before attach, then two ops open at stop.
  for (const OpEvent& e : {leave(5, 9), enter(10, 1), enter(20, 2)}) builder.add(5, e);
  const BuiltThreads built = std::move(builder).build(100, kUnixIsMonotonicPlus1000);
  expect_spans(built.threads[0], {{10, 100, 1, 0, true}, {20, 100, 2, 1, true}});
  EXPECT_EQ(built.unmatched_returns, 1u);
}

TEST(SpanBuilder, ReturnsMatchTheInnermostOpenCallOfTheSameOp) {
  // Recursion through the same op: the first exit closes the inner call.
  SpanBuilder builder;
  for (const OpEvent& e : {enter(10, 1), enter(20, 1), leave(30, 1), leave(40, 1)}) builder.add(5, e);
  const BuiltThreads built = std::move(builder).build(100, kUnixIsMonotonicPlus1000);
  expect_spans(built.threads[0], {{10, 40, 1, 0}, {20, 30, 1, 1}});
}

model::Trace two_thread_trace() {
  model::Trace trace;
  trace.operators = {{"aten::a", ""}, {"aten::b", ""}};
  model::ThreadTrack t1{1, "main", {}};
  t1.spans = {{100, 200, 0, 0, 0}, {120, 150, 0, 1, 1}, {160, 170, 0, 1, 1}};
  model::ThreadTrack t2{2, "worker", {}};
  t2.spans = {{110, 130, 0, 0, 0}};
  trace.threads = {t1, t2};
  trace.annotations = {{"ProfilerStep#0", 1, 50, 300, 0}};
  return trace;
}

TEST(AssignRecordIds, NumbersEverythingByStartTimeFromOne) {
  model::Trace trace = two_thread_trace();
  assign_record_ids(trace);
  EXPECT_EQ(trace.annotations[0].record_id, 1u);
  EXPECT_EQ(trace.threads[0].spans[0].record_id, 2u);  // 100
  EXPECT_EQ(trace.threads[1].spans[0].record_id, 3u);  // 110
  EXPECT_EQ(trace.threads[0].spans[1].record_id, 4u);  // 120
  EXPECT_EQ(trace.threads[0].spans[2].record_id, 5u);  // 160
}

TEST(AssignRecordIds, PutsTheEnclosingRangeFirstOnEqualStarts) {
  model::Trace trace;
  trace.operators = {{"aten::a", ""}};
  trace.threads = {model::ThreadTrack{1, "", {{100, 150, 0, 0, 0}, {100, 120, 0, 0, 1}}}};
  trace.annotations = {{"ProfilerStep#0", 1, 100, 200, 0}};
  assign_record_ids(trace);
  EXPECT_EQ(trace.annotations[0].record_id, 1u);
  EXPECT_EQ(trace.threads[0].spans[0].record_id, 2u);
  EXPECT_EQ(trace.threads[0].spans[1].record_id, 3u);
}

TEST(OperatorSummary, SubtractsChildrenFromSelfTime) {
  const model::Trace trace = two_thread_trace();
  const auto rows = top_operators_by_self_time(trace, 10);
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
