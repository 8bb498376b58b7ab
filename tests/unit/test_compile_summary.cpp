// The torch.compile summary from closed ranges: graphs and calls from dynamo's region names,
// outermost ops inside a region (captured) or outside every one, compile work left out, and
// the user's line of each graph's first call and of each eager op.
#include "userspace/cli/compile_summary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/trace_model.h"

namespace tprof {
namespace {

using model::RangeKind;

const model::Operator kRegion00{"Torch-Compiled Region: 0/0", "", RangeKind::kFunctionRange};
const model::Operator kRegion01{"Torch-Compiled Region: 0/1", "", RangeKind::kFunctionRange};
const model::Operator kRegion10{"Torch-Compiled Region: 1/0", "", RangeKind::kFunctionRange};
const model::Operator kSin{"aten::sin", "", RangeKind::kOperator};
const model::Operator kEmpty{"aten::empty", "", RangeKind::kOperator};
const model::Operator kStep{"ProfilerStep#0", "", RangeKind::kUserAnnotation};
const model::Operator kCompile{"_compile.compile_inner (dynamo_timed)", "", RangeKind::kUserAnnotation};
const model::Operator kCompileCounter{"pytorch.wait_counter.dynamo_compile", "", RangeKind::kWaitCounter};
const model::Operator kOtherCounter{"pytorch.wait_counter.entire_forward_compile", "", RangeKind::kWaitCounter};
const model::PythonStack kUserCall{{"/usr/lib/python3/dist-packages/torch/_dynamo/eval_frame.py", 574, "_fn", ""},
                                   {"/work/train.py", 12, "step", ""}};
const model::PythonStack kBreak{{"/work/train.py", 30, "forward", ""}};

class CompileSummaryTest : public ::testing::Test {
 protected:
  // Closes a range of `op` on thread 1 at `depth`, [start, end) in µs.
  void close(const model::Operator& op, uint32_t depth, uint64_t start_us, uint64_t end_us,
             const model::PythonStack* stack = nullptr, uint32_t tid = 1) {
    // One operator index per name, as the operator table gives them.
    const auto index = static_cast<uint32_t>(std::hash<std::string>()(op.name));
    const model::OpSpan span{
        .start_ns = start_us * 1000, .end_ns = end_us * 1000, .operator_index = index, .depth = depth};
    sink_.op({.tid = tid, .span = span, .op = op, .stack = stack});
  }

  CompileSummarySink sink_;
};

TEST(ParseCompiledRegionTest, ReadsFrameAndRecompileCount) {
  std::pair<uint64_t, uint64_t> graph;
  ASSERT_TRUE(parse_compiled_region("Torch-Compiled Region: 12/3", &graph));
  EXPECT_EQ(graph, std::make_pair(uint64_t{12}, uint64_t{3}));
  EXPECT_FALSE(parse_compiled_region("Torch-Compiled Region: 12", &graph));
  EXPECT_FALSE(parse_compiled_region("Torch-Compiled Region: a/1", &graph));
  EXPECT_FALSE(parse_compiled_region("TorchDynamo Cache Lookup", &graph));
}

TEST_F(CompileSummaryTest, NothingCompiledSaysNothing) {
  close(kSin, 0, 0, 10);
  EXPECT_TRUE(sink_.describe().empty());
}

// Inside the step annotation: region 0/0 holds sin (whose own empty is not outermost) and the
// nested region 1/0 holds another sin; an eager sin runs outside both.
TEST_F(CompileSummaryTest, OutermostOpsInsideARegionAreCapturedOnce) {
  close(kEmpty, 3, 11, 12);
  close(kSin, 2, 10, 20, &kUserCall);
  close(kSin, 3, 31, 35);
  close(kRegion10, 2, 30, 40, &kBreak);
  close(kRegion00, 1, 5, 50, &kUserCall);
  close(kSin, 1, 60, 70, &kBreak);
  close(kStep, 0, 0, 100);
  EXPECT_EQ(sink_.captured_ops(), 2u);
  EXPECT_EQ(sink_.total_ops(), 3u);
  EXPECT_EQ(sink_.graph_calls(), 2u);
  const std::vector<std::string> lines = sink_.describe();
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[0], "torch.compile: 2 graphs (of 2 frames), 2 graph calls; 2/3 ops (67%) and 58% of op time inside "
                      "compiled regions");
  EXPECT_EQ(lines[1], "  graph 0/0: 1 calls, 0.0 ms, first called from /work/train.py(12): step");
  EXPECT_EQ(lines[2], "  graph 1/0: 1 calls, 0.0 ms, first called from /work/train.py(30): forward");
  EXPECT_EQ(lines.back(), "    aten::sin x1, 0.0 ms, at /work/train.py(30): forward");
}

TEST_F(CompileSummaryTest, RecompilesAreNamedWithTheFrameFirstCall) {
  close(kRegion00, 0, 0, 10, &kUserCall);
  close(kRegion01, 0, 20, 30, &kBreak);
  close(kRegion01, 0, 40, 50, &kBreak);
  EXPECT_EQ(sink_.graph_calls(), 3u);
  const std::vector<std::string> lines = sink_.describe();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[2], "  graph 0/1: 2 calls, 0.0 ms, first called from /work/train.py(30): forward");
  EXPECT_EQ(lines[3], "  recompiled: frame 0 has 2 graphs (1 recompiles), first called from /work/train.py(12): step");
}

// Inductor's C++ kernels are not ops: their calls and their share of the regions' time have a
// line of their own, and an op a kernel were to enclose would still be outermost.
TEST_F(CompileSummaryTest, InductorKernelsHaveTheirCallsAndShareOfTheRegions) {
  const model::Operator sine_kernel{"cpp_fused_sin_0", "", RangeKind::kCompiledKernel};
  const model::Operator cosine_kernel{"cpp_fused_cos_1", "", RangeKind::kCompiledKernel};
  close(sine_kernel, 1, 10, 20);
  close(kSin, 2, 31, 32);
  close(cosine_kernel, 1, 30, 40);
  close(kRegion00, 0, 0, 50, &kUserCall);
  close(sine_kernel, 1, 110, 130);
  close(kRegion00, 0, 100, 150, &kUserCall);
  EXPECT_EQ(sink_.captured_ops(), 1u);
  EXPECT_EQ(sink_.total_ops(), 1u);
  const std::vector<std::string> lines = sink_.describe();
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[1], "  inductor C++ kernels: 3 calls of 2 kernels, 0.0 ms (40% of the time in compiled regions)");
}

// torch 2.6's compile work (tracing with fake tensors) counts neither as compiled nor as eager.
TEST_F(CompileSummaryTest, OpsOfCompileWorkCountNowhere) {
  close(kSin, 1, 1, 2);
  close(kCompile, 0, 0, 1000);
  close(kSin, 1, 1001, 1002);
  close(kRegion00, 0, 1000, 1010, &kUserCall);
  EXPECT_EQ(sink_.captured_ops(), 1u);
  EXPECT_EQ(sink_.total_ops(), 1u);
  EXPECT_NE(sink_.describe()[0].find("; 1.0 ms compiling (1 compiles)"), std::string::npos) << sink_.describe()[0];
}

// torch 2.14 opens no `(dynamo_timed)` range without its profiler: the wait counter around each
// compile times it and holds its work; other counters only enclose.
TEST_F(CompileSummaryTest, TheCompileWaitCounterTimesCompilesAndHoldsTheirWork) {
  close(kSin, 2, 1, 2);
  close(kCompileCounter, 1, 0, 2000);
  close(kOtherCounter, 0, 0, 2001);
  close(kEmpty, 1, 2002, 2003);
  close(kOtherCounter, 0, 2002, 2004);
  close(kSin, 1, 2005, 2006);
  close(kRegion00, 0, 2005, 2010, &kUserCall);
  EXPECT_EQ(sink_.captured_ops(), 1u);
  EXPECT_EQ(sink_.total_ops(), 2u);  // the empty outside: a counter other than the compile's only encloses
  EXPECT_NE(sink_.describe()[0].find("; 2.0 ms compiling (1 compiles)"), std::string::npos) << sink_.describe()[0];
}

// A recompile's counter carries dynamo's reason (its range's one output); each distinct reason
// is listed once, in the summary and from a saved trace alike, in the order of the failed graphs.
TEST_F(CompileSummaryTest, RecompileReasonsComeFromTheCompileCounters) {
  model::Value reason;
  reason.kind = model::ValueKind::kString;
  reason.text = "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16";
  model::OpSpan recompile{.start_ns = 0, .end_ns = 1000, .operator_index = 7, .depth = 0};
  recompile.outputs = {reason};
  sink_.op({.tid = 1, .span = recompile, .op = kCompileCounter});
  sink_.op({.tid = 1, .span = recompile, .op = kOtherCounter});  // 2.14's enclosing counter: the same reason
  sink_.recompile_reason(reason.text);                           // as a saved trace gives it
  sink_.recompile_reason("0/10: tensor 'x' size mismatch at index 0. expected 11, actual 12");
  sink_.recompile_reason("0/2: tensor 'x' size mismatch at index 0. expected 3, actual 4");
  close(kRegion00, 0, 1000, 1010, &kUserCall);
  const std::vector<std::string> lines = sink_.describe();
  const auto heading = std::find(lines.begin(), lines.end(), "  recompiled because (the guard that failed, as dynamo words it):");
  ASSERT_NE(heading, lines.end()) << ::testing::PrintToString(lines);
  ASSERT_NE(heading + 1, lines.end());
  ASSERT_GE(lines.end() - heading, 4);
  EXPECT_EQ(*(heading + 1), "    " + reason.text);
  EXPECT_TRUE((heading + 2)->starts_with("    0/2: ")) << *(heading + 2);  // graph ids in numeric order
  EXPECT_TRUE((heading + 3)->starts_with("    0/10: ")) << *(heading + 3);
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(), [](const std::string& line) { return line.find("mismatch") != line.npos; }), 3);
}

// torch 2.6 opens both, the counter inside the range: one compile, timed by the counter.
TEST_F(CompileSummaryTest, TheCounterTimesCompilesWhereBothAreSeen) {
  close(kCompileCounter, 1, 10, 900);
  close(kCompile, 0, 0, 1000);
  close(kSin, 1, 1001, 1002);
  close(kRegion00, 0, 1000, 1010, &kUserCall);
  EXPECT_NE(sink_.describe()[0].find("; 0.9 ms compiling (1 compiles)"), std::string::npos) << sink_.describe()[0];
}

TEST_F(CompileSummaryTest, ResumeFunctionsNameTheGraphBreak) {
  close(kRegion00, 0, 0, 10, &kUserCall);
  for (int call = 0; call < 2; ++call)
    sink_.python_span(1, {.name = "/work/train.py(30): torch_dynamo_resume_in_forward_at_31"});
  sink_.python_span(1, {.name = "/work/train.py(12): step"});
  sink_.python_span(1, {.name = "nn.Module: Linear_0"});
  const std::vector<std::string> lines = sink_.describe();
  EXPECT_NE(std::find(lines.begin(), lines.end(), "  graph break: in forward at /work/train.py(31)"),
            lines.end());
}

// Ranges close per thread: one thread's pending ops never fold into another's region.
TEST_F(CompileSummaryTest, ThreadsAreApart) {
  close(kSin, 1, 1, 2, nullptr, 2);
  close(kRegion00, 0, 0, 10, &kUserCall);
  close(kStep, 0, 0, 3, nullptr, 2);
  EXPECT_EQ(sink_.captured_ops(), 0u);
  EXPECT_EQ(sink_.total_ops(), 1u);
}

}  // namespace
}  // namespace tprof
