// The operator table growing with record_function names and autograd node classes: stable
// indices after the probed ops, one RangeKind each, node names looked up once per vtable.
#include "userspace/assemble/range_operators.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/trace_model.h"

namespace tprof {
namespace {

using model::RangeKind;

constexpr uint64_t kMmBackwardVptr = 0x7f00'0000'1010;
constexpr uint64_t kOtherMmBackwardVptr = 0x7f00'0000'2010;  // another vtable, the same class name
constexpr uint64_t kAccumulateGradVptr = 0x7f00'0000'3010;
constexpr uint64_t kNamelessVptr = 0x7f00'0000'4010;
constexpr uint64_t kOtherNamelessVptr = 0x7f00'0000'5010;

class RangeOperatorsTest : public ::testing::Test {
 protected:
  RangeOperatorsTest()
      : operators_{{"aten::mm", "aten::mm(Tensor self, Tensor mat2) -> Tensor", RangeKind::kOperator},
                   {"aten::add", "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                    RangeKind::kOperator}},
        ranges_(operators_, [this](uint64_t vptr) {
          ++lookups_[vptr];
          if (vptr == kMmBackwardVptr || vptr == kOtherMmBackwardVptr) return std::string("MmBackward0");
          if (vptr == kAccumulateGradVptr) return std::string("torch::autograd::AccumulateGrad");
          return std::string();
        }) {}

  void expect_operator(uint32_t index, const std::string& name, RangeKind kind) {
    ASSERT_LT(index, operators_.size());
    EXPECT_EQ(operators_[index].name, name) << index;
    EXPECT_EQ(operators_[index].schema, "") << index;
    EXPECT_EQ(operators_[index].kind, kind) << index;
  }

  std::vector<model::Operator> operators_;
  std::map<uint64_t, int> lookups_;
  RangeOperators ranges_;
};

TEST_F(RangeOperatorsTest, AnnotationsGetStableIndicesAfterTheOps) {
  EXPECT_EQ(ranges_.annotation("ProfilerStep#0"), 2u);
  EXPECT_EQ(ranges_.annotation("## forward ##"), 3u);
  EXPECT_EQ(ranges_.annotation("ProfilerStep#0"), 2u);
  EXPECT_EQ(ranges_.annotation("## forward ##"), 3u);
  EXPECT_EQ(ranges_.annotation("ProfilerStep#1"), 4u);
  ASSERT_EQ(operators_.size(), 5u);
  expect_operator(2, "ProfilerStep#0", RangeKind::kUserAnnotation);
  expect_operator(3, "## forward ##", RangeKind::kUserAnnotation);
  expect_operator(4, "ProfilerStep#1", RangeKind::kUserAnnotation);
  // The probed ops are untouched.
  EXPECT_EQ(operators_[0].name, "aten::mm");
  EXPECT_EQ(operators_[0].kind, RangeKind::kOperator);
  EXPECT_EQ(operators_[1].name, "aten::add");
  EXPECT_TRUE(lookups_.empty());
}

TEST_F(RangeOperatorsTest, AnAnnotationNamedLikeAnOpIsStillAnAnnotation) {
  EXPECT_EQ(ranges_.annotation("aten::add"), 2u);
  ASSERT_EQ(operators_.size(), 3u);
  expect_operator(2, "aten::add", RangeKind::kUserAnnotation);
  EXPECT_EQ(operators_[1].kind, RangeKind::kOperator);
}

TEST_F(RangeOperatorsTest, AFunctionRangeIsNotTheAnnotationOfItsName) {
  EXPECT_EQ(ranges_.annotation("Torch-Compiled Region: 0/0", RangeKind::kFunctionRange), 2u);
  EXPECT_EQ(ranges_.annotation("Torch-Compiled Region: 0/0"), 3u);
  EXPECT_EQ(ranges_.annotation("Torch-Compiled Region: 0/0", RangeKind::kFunctionRange), 2u);
  expect_operator(2, "Torch-Compiled Region: 0/0", RangeKind::kFunctionRange);
  expect_operator(3, "Torch-Compiled Region: 0/0", RangeKind::kUserAnnotation);
}

TEST_F(RangeOperatorsTest, AnEmptyAnnotationNameIsKeptAsIs) {
  EXPECT_EQ(ranges_.annotation(""), 2u);
  EXPECT_EQ(ranges_.annotation(""), 2u);
  ASSERT_EQ(operators_.size(), 3u);
  expect_operator(2, "", RangeKind::kUserAnnotation);
}

TEST_F(RangeOperatorsTest, NodesAndTheirEvaluateFunctionRangesAreSeparateOperators) {
  EXPECT_EQ(ranges_.node(kMmBackwardVptr, RangeKind::kBackwardEvaluate), 2u);
  EXPECT_EQ(ranges_.node(kMmBackwardVptr, RangeKind::kBackwardNode), 3u);
  EXPECT_EQ(ranges_.node(kAccumulateGradVptr, RangeKind::kBackwardNode), 4u);
  EXPECT_EQ(ranges_.node(kAccumulateGradVptr, RangeKind::kBackwardEvaluate), 5u);
  // Again: the same indices, nothing added.
  EXPECT_EQ(ranges_.node(kMmBackwardVptr, RangeKind::kBackwardEvaluate), 2u);
  EXPECT_EQ(ranges_.node(kMmBackwardVptr, RangeKind::kBackwardNode), 3u);
  EXPECT_EQ(ranges_.node(kAccumulateGradVptr, RangeKind::kBackwardNode), 4u);
  EXPECT_EQ(ranges_.node(kAccumulateGradVptr, RangeKind::kBackwardEvaluate), 5u);
  ASSERT_EQ(operators_.size(), 6u);
  expect_operator(2, "autograd::engine::evaluate_function: MmBackward0", RangeKind::kBackwardEvaluate);
  expect_operator(3, "MmBackward0", RangeKind::kBackwardNode);
  expect_operator(4, "torch::autograd::AccumulateGrad", RangeKind::kBackwardNode);
  expect_operator(5, "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                  RangeKind::kBackwardEvaluate);
}

TEST_F(RangeOperatorsTest, LooksUpEachVtableOnce) {
  for (int round = 0; round < 3; ++round) {
    ranges_.node(kMmBackwardVptr, RangeKind::kBackwardEvaluate);
    ranges_.node(kMmBackwardVptr, RangeKind::kBackwardNode);
    ranges_.node(kNamelessVptr, RangeKind::kBackwardNode);
    ranges_.node(kNamelessVptr, RangeKind::kBackwardEvaluate);
  }
  EXPECT_EQ(lookups_, (std::map<uint64_t, int>{{kMmBackwardVptr, 1}, {kNamelessVptr, 1}}));
}

TEST_F(RangeOperatorsTest, VtablesOfTheSameClassShareItsOperators) {
  const uint32_t node = ranges_.node(kMmBackwardVptr, RangeKind::kBackwardNode);
  const uint32_t evaluate = ranges_.node(kMmBackwardVptr, RangeKind::kBackwardEvaluate);
  EXPECT_EQ(ranges_.node(kOtherMmBackwardVptr, RangeKind::kBackwardNode), node);
  EXPECT_EQ(ranges_.node(kOtherMmBackwardVptr, RangeKind::kBackwardEvaluate), evaluate);
  EXPECT_EQ(operators_.size(), 4u);
  EXPECT_EQ(lookups_, (std::map<uint64_t, int>{{kMmBackwardVptr, 1}, {kOtherMmBackwardVptr, 1}}));
}

TEST_F(RangeOperatorsTest, UnnamedNodesFallBackToTheBaseClass) {
  EXPECT_EQ(ranges_.node(kNamelessVptr, RangeKind::kBackwardNode), 2u);
  EXPECT_EQ(ranges_.node(kNamelessVptr, RangeKind::kBackwardEvaluate), 3u);
  // Every nameless vtable is the same "torch::autograd::Node".
  EXPECT_EQ(ranges_.node(kOtherNamelessVptr, RangeKind::kBackwardNode), 2u);
  EXPECT_EQ(ranges_.node(kOtherNamelessVptr, RangeKind::kBackwardEvaluate), 3u);
  ASSERT_EQ(operators_.size(), 4u);
  expect_operator(2, "torch::autograd::Node", RangeKind::kBackwardNode);
  expect_operator(3, "autograd::engine::evaluate_function: torch::autograd::Node", RangeKind::kBackwardEvaluate);
  EXPECT_EQ(lookups_, (std::map<uint64_t, int>{{kNamelessVptr, 1}, {kOtherNamelessVptr, 1}}));
}

TEST_F(RangeOperatorsTest, AnnotationsAndNodesWithOneNameStayApart) {
  const uint32_t annotation = ranges_.annotation("MmBackward0");
  const uint32_t node = ranges_.node(kMmBackwardVptr, RangeKind::kBackwardNode);
  const uint32_t evaluate_annotation = ranges_.annotation("autograd::engine::evaluate_function: MmBackward0");
  const uint32_t evaluate = ranges_.node(kMmBackwardVptr, RangeKind::kBackwardEvaluate);
  EXPECT_EQ(annotation, 2u);
  EXPECT_EQ(node, 3u);
  EXPECT_EQ(evaluate_annotation, 4u);
  EXPECT_EQ(evaluate, 5u);
  ASSERT_EQ(operators_.size(), 6u);
  expect_operator(2, "MmBackward0", RangeKind::kUserAnnotation);
  expect_operator(3, "MmBackward0", RangeKind::kBackwardNode);
  expect_operator(4, "autograd::engine::evaluate_function: MmBackward0", RangeKind::kUserAnnotation);
  expect_operator(5, "autograd::engine::evaluate_function: MmBackward0", RangeKind::kBackwardEvaluate);
}

TEST_F(RangeOperatorsTest, IndicesInterleaveInOrderOfFirstSight) {
  EXPECT_EQ(ranges_.node(kAccumulateGradVptr, RangeKind::kBackwardNode), 2u);
  EXPECT_EQ(ranges_.annotation("ProfilerStep#0"), 3u);
  EXPECT_EQ(ranges_.node(kMmBackwardVptr, RangeKind::kBackwardEvaluate), 4u);
  EXPECT_EQ(ranges_.annotation("ProfilerStep#0"), 3u);
  EXPECT_EQ(ranges_.node(kAccumulateGradVptr, RangeKind::kBackwardNode), 2u);
  EXPECT_EQ(operators_.size(), 5u);
}

// A boxed call of an overload is the planned op of that schema; of an overload packet, or of an
// op no plan has, an operator of that name alone.
TEST_F(RangeOperatorsTest, BoxedOpsAreThePlannedOpOfTheirSchema) {
  EXPECT_EQ(ranges_.boxed_op("aten::mm", ""), 0u);
  EXPECT_EQ(ranges_.boxed_op("aten::add", "Tensor"), 1u);
  EXPECT_EQ(ranges_.boxed_op("aten::add", "Scalar"), 2u) << "no planned op has that schema";
  EXPECT_EQ(ranges_.boxed_op("aten::add", std::nullopt), 2u) << "an overload packet's call: the name alone";
  EXPECT_EQ(ranges_.boxed_op("aten::mm", std::nullopt), 3u);
  EXPECT_EQ(ranges_.boxed_op("mylib::custom", ""), 4u);
  EXPECT_EQ(ranges_.boxed_op("aten::add", "Scalar"), 2u);
  ASSERT_EQ(operators_.size(), 5u);
  expect_operator(2, "aten::add", RangeKind::kOperator);
  expect_operator(3, "aten::mm", RangeKind::kOperator);
  expect_operator(4, "mylib::custom", RangeKind::kOperator);
}

TEST_F(RangeOperatorsTest, BoxedOpsTorchNeverObservesAreNone) {
  EXPECT_FALSE(ranges_.boxed_op("profiler::_record_function_enter_new", ""));
  EXPECT_FALSE(ranges_.boxed_op("profiler::_record_function_exit", std::nullopt));
  EXPECT_FALSE(ranges_.boxed_op("aten::size", "int"));
  EXPECT_EQ(operators_.size(), 2u);
}

// A JIT-only operator has no c10 name where BPF reads it: no range, as torch records none, and
// counted.
TEST_F(RangeOperatorsTest, UnreadableBoxedOpNamesHaveNoRangeAndAreCounted) {
  EXPECT_FALSE(ranges_.boxed_op("", std::nullopt));
  EXPECT_FALSE(ranges_.boxed_op("no_namespace", ""));
  EXPECT_FALSE(ranges_.boxed_op("aten::", ""));
  EXPECT_FALSE(ranges_.boxed_op("aten::co\x01s", ""));
  EXPECT_FALSE(ranges_.boxed_op("aten::size", ""));  // unobserved: not counted
  EXPECT_EQ(ranges_.unnamed_boxed_calls(), 4u);
}

TEST(RangeOperators, StartsAfterAnEmptyTable) {
  std::vector<model::Operator> operators;
  RangeOperators ranges(operators, [](uint64_t) { return std::string("AddBackward0"); });
  EXPECT_EQ(ranges.annotation("step"), 0u);
  EXPECT_EQ(ranges.node(1, RangeKind::kBackwardNode), 1u);
  ASSERT_EQ(operators.size(), 2u);
  EXPECT_EQ(operators[1].name, "AddBackward0");
}

}  // namespace
}  // namespace tprof
