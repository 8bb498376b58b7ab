// python_function spans rebuilt, as recording goes, from the stacks seen at ops and samples:
// invocation identity, nesting with ops, torn stacks, torch's naming and numbering, and when a
// span is handed on.
#include <gtest/gtest.h>

#include "userspace/assemble/python_timeline.h"

#include <algorithm>
#include <tuple>

namespace tprof {
namespace {

ResolvedFrame frame(uint64_t address, uint64_t code, std::string function, int first_line = 1) {
  ResolvedFrame resolved;
  resolved.frame_address = address;
  resolved.code_address = code;
  resolved.file = "train.py";
  resolved.function = std::move(function);
  resolved.first_line = first_line;
  return resolved;
}

// Stacks are written outermost first here for readability; the walker stores them innermost first.
ResolvedStack stack(std::vector<ResolvedFrame> outermost_first) {
  return ResolvedStack(outermost_first.rbegin(), outermost_first.rend());
}

StackObservation op(uint64_t start, uint64_t end, const ResolvedStack& frames) { return {start, end, &frames, true}; }
StackObservation sample(uint64_t at, const ResolvedStack& frames) { return {at, at, &frames, false}; }

struct Expected {
  uint64_t start, end;
  uint32_t depth;
  std::string function;
};

// Feeds one thread's observations through a timeline; the spans in start order.
std::vector<model::PythonSpan> build(const std::vector<StackObservation>& observations, PythonSpanNamer& namer) {
  PythonTimeline timeline(namer);
  std::vector<model::PythonSpan> spans;
  auto keep = [&](const model::PythonSpan& span) { spans.push_back(span); };
  for (const StackObservation& observation : observations) timeline.observe(observation, keep);
  timeline.finish(keep);
  std::sort(spans.begin(), spans.end(), [](const model::PythonSpan& a, const model::PythonSpan& b) {
    return std::tie(a.start_ns, a.depth) < std::tie(b.start_ns, b.depth);
  });
  return spans;
}

std::vector<model::PythonSpan> build(const std::vector<StackObservation>& observations) {
  PythonSpanNamer namer;
  return build(observations, namer);
}

void expect_spans(const std::vector<model::PythonSpan>& spans, const std::vector<Expected>& expected) {
  ASSERT_EQ(spans.size(), expected.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    SCOPED_TRACE("span " + std::to_string(i));
    EXPECT_EQ(spans[i].start_ns, expected[i].start);
    EXPECT_EQ(spans[i].end_ns, expected[i].end);
    EXPECT_EQ(spans[i].depth, expected[i].depth);
    EXPECT_TRUE(spans[i].name.ends_with("): " + expected[i].function)) << spans[i].name;
  }
}

const ResolvedFrame kMain = frame(0x100, 0xa, "main");
const ResolvedFrame kStepA = frame(0x200, 0xb, "step");
const ResolvedFrame kForward = frame(0x300, 0xc, "forward");
const ResolvedFrame kLoss = frame(0x300, 0xd, "loss");  // same frame slot, other code

// torch names a frame by co_name (profiler_python.cpp CodeLocation); co_qualname goes along
// where it says more.
TEST(PythonTimeline, SpansAreNamedByCoNameAndKeepTheQualifiedName) {
  ResolvedFrame nested = frame(0x100, 0xa, "training_step", 85);
  nested.qualified_name = "make_training_step.<locals>.training_step";
  ResolvedFrame plain = frame(0x200, 0xb, "main", 10);
  plain.qualified_name = "main";
  const ResolvedStack frames = stack({plain, nested});
  const std::vector<model::PythonSpan> spans = build({op(10, 20, frames)});
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].name, "train.py(10): main");
  EXPECT_EQ(spans[0].qualified_name, "");
  EXPECT_EQ(spans[1].name, "train.py(85): training_step");
  EXPECT_EQ(spans[1].qualified_name, "make_training_step.<locals>.training_step");
}

TEST(PythonTimeline, SharedFramesSpanEveryOpTheyAppearIn) {
  const ResolvedStack in_forward = stack({kMain, kStepA, kForward});
  const ResolvedStack in_loss = stack({kMain, kStepA, kLoss});
  expect_spans(build({op(10, 20, in_forward), op(30, 40, in_forward), op(50, 60, in_loss)}),
               {{10, 60, 0, "main"}, {10, 60, 1, "step"}, {10, 40, 2, "forward"}, {50, 60, 2, "loss"}});
}

// A record_function range ends inside its own __exit__, a frame called from the range's `with`
// (the range's stack): a sample before the end and one after both see __exit__. Its span must not
// cross the range's end: the part inside ends with it, the part after is a span of its own. (A
// frame first seen by a sample inside a range may have begun right after the range's start.)
TEST(PythonTimeline, AFrameCalledInsideARangeEndsWithIt) {
  const ResolvedFrame exit = frame(0x300, 0xe, "__exit__");
  const ResolvedStack around_with = stack({kMain, kStepA});
  const ResolvedStack in_exit = stack({kMain, kStepA, exit});
  expect_spans(build({op(10, 50, around_with), sample(45, in_exit), sample(55, in_exit), sample(70, around_with)}),
               {{10, 70, 0, "main"}, {10, 70, 1, "step"}, {11, 50, 2, "__exit__"}, {55, 55, 2, "__exit__"}});
}

TEST(PythonTimeline, ANewFrameAddressOrCodeIsANewInvocation) {
  const ResolvedFrame second_step = frame(0x280, 0xb, "step");
  const ResolvedStack first = stack({kMain, kStepA});
  const ResolvedStack second = stack({kMain, second_step});
  expect_spans(build({op(10, 20, first), op(30, 40, second)}),
               {{10, 40, 0, "main"}, {10, 20, 1, "step"}, {30, 40, 1, "step"}});
}

ResolvedFrame at_instruction(ResolvedFrame frame, uint32_t instruction,
                             const std::vector<symbolizer::BackwardJump>* loops) {
  frame.instruction = instruction;
  frame.loops = loops;
  return frame;
}

// `for _ in range(n): step()` from one line: the same slot, the caller at the same instruction;
// only step's own instruction, back at its start, says that it was called again. A loop of
// step's own code that spans both instructions could have taken it back, and code whose loops
// are unknown keeps the old rule: those stay one call.
TEST(PythonTimeline, ARepeatedCallBackAtAnEarlierInstructionIsANewInvocation) {
  const std::vector<symbolizer::BackwardJump> no_loops;
  const std::vector<symbolizer::BackwardJump> loop_over_body = {{40, 5}};
  const std::vector<symbolizer::BackwardJump> loop_elsewhere = {{60, 50}};
  const ResolvedFrame main_at_call = at_instruction(kMain, 7, &no_loops);
  for (const auto& [loops, calls] :
       std::vector<std::pair<const std::vector<symbolizer::BackwardJump>*, size_t>>{
           {&no_loops, 2}, {&loop_elsewhere, 2}, {&loop_over_body, 1}, {nullptr, 1}}) {
    const ResolvedStack late_in_step = stack({main_at_call, at_instruction(kStepA, 30, loops)});
    const ResolvedStack early_in_step = stack({main_at_call, at_instruction(kStepA, 10, loops)});
    const auto spans = build({op(10, 20, late_in_step), op(30, 40, early_in_step)});
    EXPECT_EQ(static_cast<size_t>(std::count_if(spans.begin(), spans.end(),
                                                [](const auto& span) { return span.name.ends_with("step"); })),
              calls);
  }
  // Forward through the code is the same call, loops or not.
  const ResolvedStack early = stack({main_at_call, at_instruction(kStepA, 10, &no_loops)});
  const ResolvedStack late = stack({main_at_call, at_instruction(kStepA, 30, &no_loops)});
  expect_spans(build({op(10, 20, early), op(30, 40, late)}), {{10, 40, 0, "main"}, {10, 40, 1, "step"}});
}

// Still the iteration of an Optimizer.step call: the caller's frames continue it, none back at
// an earlier instruction; deeper frames of the boundary (the optimizer's own) are not compared.
TEST(PythonTimeline, SameIterationFollowsTheOptimizersCaller) {
  const std::vector<symbolizer::BackwardJump> no_loops;
  const std::vector<symbolizer::BackwardJump> main_loop = {{20, 2}};
  const ResolvedFrame optimizer = frame(0x400, 0xe, "step_wrapper");
  const ResolvedStack boundary = stack({at_instruction(kMain, 8, &main_loop), at_instruction(kStepA, 30, &no_loops), optimizer});
  const size_t caller_frames = 2;
  const ResolvedStack tail_in_step = stack({at_instruction(kMain, 8, &main_loop), at_instruction(kStepA, 34, &no_loops),
                                            frame(0x400, 0xf, "log_metrics")});
  const ResolvedStack after_step_in_loop = stack({at_instruction(kMain, 12, &main_loop)});
  const ResolvedStack next_call = stack({at_instruction(kMain, 8, &main_loop), at_instruction(kStepA, 3, &no_loops)});
  const ResolvedStack loop_went_round = stack({at_instruction(kMain, 4, &main_loop)});
  EXPECT_TRUE(same_iteration(boundary, caller_frames, tail_in_step));
  EXPECT_TRUE(same_iteration(boundary, caller_frames, after_step_in_loop));
  EXPECT_FALSE(same_iteration(boundary, caller_frames, next_call));
  EXPECT_FALSE(same_iteration(boundary, caller_frames, loop_went_round));
  // One level out: the function running the loop has returned, and the loop with it.
  const ResolvedFrame script = frame(0x50, 0xf0, "<module>");
  const ResolvedStack looping = stack({at_instruction(script, 3, &no_loops), at_instruction(kMain, 8, &main_loop),
                                       at_instruction(kStepA, 30, &no_loops), optimizer});
  EXPECT_FALSE(same_iteration(looping, 3, stack({at_instruction(script, 5, &no_loops)})));
  EXPECT_TRUE(same_iteration(looping, 3, stack({at_instruction(script, 3, &no_loops), at_instruction(kMain, 12, &main_loop)})));
}

TEST(PythonTimeline, SamplesBoundSpansBetweenOps) {
  const ResolvedStack in_forward = stack({kMain, kStepA, kForward});
  const ResolvedStack only_step = stack({kMain, kStepA});
  const ResolvedStack pure_python = stack({kMain, kStepA, kLoss});
  expect_spans(build({op(10, 20, in_forward), sample(25, in_forward), sample(30, only_step),
                                  sample(35, pure_python), op(40, 50, only_step)}),
               {{10, 50, 0, "main"}, {10, 50, 1, "step"}, {10, 25, 2, "forward"}, {35, 35, 2, "loss"}});
}

TEST(PythonTimeline, PythonCalledFromInsideAnOpNestsInsideIt) {
  // A C++ op calls back into Python (a hook): the nested op's stack continues the outer one.
  const ResolvedStack outer = stack({kMain, kStepA});
  const ResolvedStack hook = stack({kMain, kStepA, kForward});
  expect_spans(build({op(10, 100, outer), op(20, 30, hook), op(110, 120, outer)}),
               {{10, 120, 0, "main"}, {10, 120, 1, "step"}, {20, 30, 2, "forward"}});
}

// __torch_dispatch__ inside aten::mul [10, 100) calls launch(), which makes a CUDA API call
// [25, 40) that tprof sees from CUPTI: the sampler looks at 30, inside the call. The frames only
// that sample shows must enclose the call: they began after the last look that lacked them (the
// op's entry, 10) and ended before the next (the nested op at 60), so that is how far they run.
// Frames a later op shows end at it as before; between top-level ops, samples stay the edges.
TEST(PythonTimeline, FramesOnlyASampleInsideAnOpShowsRunOutToTheLooksAround) {
  const ResolvedFrame dispatch = frame(0x400, 0xe, "__torch_dispatch__");
  const ResolvedFrame launch = frame(0x500, 0xf, "launch");
  const ResolvedStack outer = stack({kMain, kStepA});
  const ResolvedStack in_launch = stack({kMain, kStepA, dispatch, launch});
  const ResolvedStack in_dispatch = stack({kMain, kStepA, dispatch});
  expect_spans(build({op(10, 100, outer), sample(30, in_launch), op(60, 70, in_dispatch), op(110, 120, outer)}),
               {{10, 120, 0, "main"},
                {10, 120, 1, "step"},
                {11, 70, 2, "__torch_dispatch__"},
                {11, 59, 3, "launch"}});
  // The op returns before the next look: the frame it called back into ended by its return.
  expect_spans(build({op(10, 100, outer), sample(30, in_launch), op(110, 120, outer)}),
               {{10, 120, 0, "main"}, {10, 120, 1, "step"}, {11, 100, 2, "__torch_dispatch__"}, {11, 100, 3, "launch"}});
  // Two samples in a row inside the op: the gap between them goes to the frame that closed.
  const ResolvedFrame other = frame(0x600, 0x10, "other");
  const ResolvedStack in_other = stack({kMain, kStepA, dispatch, other});
  expect_spans(build({op(10, 100, outer), sample(30, in_launch), sample(50, in_other), op(110, 120, outer)}),
               {{10, 120, 0, "main"},
                {10, 120, 1, "step"},
                {11, 100, 2, "__torch_dispatch__"},
                {11, 49, 3, "launch"},
                {50, 100, 3, "other"}});
  // At top level the samples are the edges.
  expect_spans(build({op(10, 20, outer), sample(30, in_launch), op(110, 120, outer)}),
               {{10, 120, 0, "main"}, {10, 120, 1, "step"}, {30, 30, 2, "__torch_dispatch__"}, {30, 30, 3, "launch"}});
}

TEST(PythonTimeline, IgnoresATornStackInsideAnOp) {
  // A stack that does not continue the enclosing op's is a torn read: it must not split
  // frames that the enclosing op proves are still running.
  const ResolvedStack outer = stack({kMain, kStepA});
  const ResolvedStack torn = stack({kMain, frame(0x999, 0xe, "garbage")});
  expect_spans(build({op(10, 100, outer), sample(50, torn), op(60, 70, torn), op(110, 120, outer)}),
               {{10, 120, 0, "main"}, {10, 120, 1, "step"}});
}

TEST(PythonTimeline, NamesModulesAndNumbersIdsLikeTorch) {
  ResolvedFrame linear_a = frame(0x300, 0xc, "Module._call_impl");
  linear_a.module_class = "Linear";
  linear_a.module_self = 0xaaaa;
  ResolvedFrame linear_b = linear_a;
  linear_b.frame_address = 0x310;
  linear_b.module_self = 0xbbbb;
  ResolvedFrame linear_a_again = linear_a;
  linear_a_again.frame_address = 0x320;
  const ResolvedStack first = stack({kMain, linear_a});
  const ResolvedStack second = stack({kMain, linear_b});
  const ResolvedStack third = stack({kMain, linear_a_again});

  const std::vector<model::PythonSpan> spans = build({op(10, 20, first), op(30, 40, second), op(50, 60, third)});
  ASSERT_EQ(spans.size(), 4u);
  EXPECT_EQ(spans[0].name, "train.py(1): main");
  EXPECT_EQ(spans[0].python_id, 1u);
  EXPECT_EQ(spans[0].parent_python_id, 0u);
  EXPECT_EQ(spans[0].module_id, -1);
  EXPECT_EQ(spans[1].name, "nn.Module: Linear_0");
  EXPECT_EQ(spans[1].parent_python_id, 1u);
  EXPECT_EQ(spans[2].name, "nn.Module: Linear_1");
  EXPECT_EQ(spans[2].module_id, 1);
  EXPECT_EQ(spans[3].name, "nn.Module: Linear_0") << "the same module object keeps its number";
  EXPECT_EQ(spans[3].python_id, 4u);
}

// Ids are process-wide, in the order spans open, whichever thread they are on.
TEST(PythonTimeline, NumbersPythonIdsProcessWideInOpeningOrder) {
  const ResolvedStack main_stack = stack({kMain});
  const ResolvedStack worker_stack = stack({frame(0x900, 0xf, "worker")});
  PythonSpanNamer namer;
  EXPECT_EQ(build({op(10, 15, worker_stack)}, namer).at(0).python_id, 1u);
  EXPECT_EQ(build({op(20, 30, main_stack)}, namer).at(0).python_id, 2u);
}

// A span is handed on as soon as an observation shows its frame gone, not at the end.
TEST(PythonTimeline, HandsOnASpanOnceItsFrameIsGone) {
  const ResolvedStack in_forward = stack({kMain, kStepA, kForward});
  const ResolvedStack in_loss = stack({kMain, kStepA, kLoss});
  PythonSpanNamer namer;
  PythonTimeline timeline(namer);
  std::vector<std::string> emitted;
  auto keep = [&](const model::PythonSpan& span) { emitted.push_back(span.name); };
  timeline.observe(op(10, 20, in_forward), keep);
  EXPECT_TRUE(emitted.empty());
  timeline.observe(op(30, 40, in_loss), keep);
  EXPECT_EQ(emitted, (std::vector<std::string>{"train.py(1): forward"}));
  timeline.finish(keep);
  // At the end the rest close together, outermost first.
  EXPECT_EQ(emitted, (std::vector<std::string>{"train.py(1): forward", "train.py(1): main", "train.py(1): step",
                                               "train.py(1): loss"}));
}

}  // namespace
}  // namespace tprof
