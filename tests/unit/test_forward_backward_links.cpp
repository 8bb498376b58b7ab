// Which op created which backward node (from the thread's sequence counter around each op),
// and the fwdbwd links built from that.
#include "userspace/forward_backward_links.h"

#include <gtest/gtest.h>

#include "userspace/span_builder.h"

namespace tprof {
namespace {

const MonotonicToUnix kSameClock(0);

OpEvent op_event(uint64_t ns, uint32_t op, bool is_exit, uint64_t counter) {
  OpEvent event;
  event.monotonic_ns = ns;
  event.op_id = op;
  event.is_exit = is_exit;
  event.sequence_counter = counter;
  return event;
}

TEST(CreatedNodes, GoToTheInnermostOpThatAdvancedTheCounter) {
  // conv2d (composite) calls convolution, whose autograd kernel makes node 13 and then calls
  // _convolution below autograd; linear calls t (node 18) and addmm (node 19).
  SpanBuilder builder;
  for (OpEvent event : {op_event(1, 0, false, 13), op_event(2, 1, false, 13), op_event(3, 2, false, 14),
                        op_event(4, 2, true, 14), op_event(5, 1, true, 14), op_event(6, 0, true, 14),
                        op_event(7, 3, false, 18), op_event(8, 4, false, 18), op_event(9, 4, true, 19),
                        op_event(10, 5, false, 19), op_event(11, 5, true, 20), op_event(12, 3, true, 20)})
    builder.add(1, std::move(event));
  const BuiltThreads built = std::move(builder).build(100, kSameClock);
  const auto& spans = built.threads.at(0).spans;
  ASSERT_EQ(spans.size(), 6u);
  EXPECT_EQ(spans[0].sequence_number, -1) << "conv2d: its child made the node";
  EXPECT_EQ(spans[1].sequence_number, 13) << "convolution";
  EXPECT_EQ(spans[2].sequence_number, -1) << "_convolution made none";
  EXPECT_EQ(spans[3].sequence_number, -1) << "linear: its children made both";
  EXPECT_EQ(spans[4].sequence_number, 18) << "t";
  EXPECT_EQ(spans[5].sequence_number, 19) << "addmm";
}

TEST(CreatedNodes, NeedTheCounterAtBothEnds) {
  SpanBuilder builder;
  builder.add(1, op_event(1, 0, false, UINT64_MAX));
  builder.add(1, op_event(2, 0, true, 5));
  const BuiltThreads built = std::move(builder).build(100, kSameClock);
  EXPECT_EQ(built.threads.at(0).spans.at(0).sequence_number, -1);
}

model::OpSpan span(uint32_t operator_index, uint64_t start_ns, int64_t sequence_number) {
  model::OpSpan result;
  result.operator_index = operator_index;
  result.start_ns = start_ns;
  result.end_ns = start_ns + 1;
  result.sequence_number = sequence_number;
  return result;
}

TEST(ForwardBackwardLinks, PairNodesWithTheOpThatMadeThem) {
  model::Trace trace;
  trace.operators = {{"aten::mm", "", model::RangeKind::kOperator},
                     {"MmBackward0", "", model::RangeKind::kBackwardNode},
                     {"autograd::engine::evaluate_function: MmBackward0", "", model::RangeKind::kBackwardEvaluate}};
  model::ThreadTrack thread;
  thread.tid = 1;
  thread.spans = {span(0, 10, 7), span(2, 20, 7), span(1, 21, 7), span(1, 30, 8)};
  trace.threads.push_back(thread);
  link_forward_backward(trace);
  ASSERT_EQ(trace.forward_backward_links.size(), 1u) << "only the node (not evaluate_function), only for 7";
  const model::ForwardBackwardLink& link = trace.forward_backward_links[0];
  EXPECT_EQ(link.forward_span_index, 0u);
  EXPECT_EQ(link.backward_span_index, 2u);
}

TEST(ForwardBackwardLinks, SkipANumberMadeOnTwoThreads) {
  model::Trace trace;
  trace.operators = {{"aten::mm", "", model::RangeKind::kOperator},
                     {"MmBackward0", "", model::RangeKind::kBackwardNode}};
  model::ThreadTrack first;
  first.tid = 1;
  first.spans = {span(0, 10, 3), span(1, 40, 3)};
  model::ThreadTrack second;
  second.tid = 2;
  second.spans = {span(0, 15, 3)};
  trace.threads = {first, second};
  link_forward_backward(trace);
  EXPECT_TRUE(trace.forward_backward_links.empty());
}

}  // namespace
}  // namespace tprof
