// --memory-timeline: torch's [times, sizes] layout, and each storage's category told by torch's
// MemoryProfile rules (exporters/memory_categories.h) from a small training step fed as the span
// closer hands it on: memory events as they happen, ranges as they close.
#include "exporters/memory_timeline_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/process_harness.h"
#include "tests/support/trace_validator.h"

namespace tprof::exporters {
namespace {

model::Value tensor(uint64_t storage, int64_t elements) {
  model::Value value;
  value.kind = model::ValueKind::kTensor;
  value.tensor.storage_address = storage;
  value.tensor.sizes = {elements};
  value.tensor.strides = {1};
  value.tensor.numel = elements;
  value.tensor.itemsize = 4;
  value.tensor.device = "cpu";
  return value;
}

// Which arguments an op writes, as its schema says (`(a!)`).
model::Operator aten(std::string name, std::vector<bool> writes_argument) {
  return {std::move(name), "(schema)", model::RangeKind::kOperator, std::move(writes_argument)};
}
const model::Operator kLinear = aten("aten::linear", {false, false, false});
const model::Operator kFill = aten("aten::fill_", {true, false});
const model::Operator kMm = aten("aten::mm", {false, false});
const model::Operator kDetach = aten("aten::detach", {false});
const model::Operator kMul = aten("aten::mul_", {true, false});
const model::Operator kAdd = aten("aten::add_", {true, false, false});
const model::Operator kMmBackward{"MmBackward0", "", model::RangeKind::kBackwardNode};
const model::Operator kAccumulateGrad{"torch::autograd::AccumulateGrad", "", model::RangeKind::kBackwardNode};
const model::Operator kOptimizerStep{"Optimizer.step#SGD.step", "", model::RangeKind::kUserAnnotation};
const model::Operator kLoop{"## LOOP 0 ##", "", model::RangeKind::kUserAnnotation};

constexpr uint64_t kWeight = 0x1000, kMomentum = 0x2000, kInput = 0x3000, kActivation = 0x4000, kTemporary = 0x5000,
                   kGradient = 0x6000, kDetail = 0x7000, kNeverATensor = 0x9000;

class TimelineTest : public ::testing::Test {
 protected:
  // `range`: the record id of the innermost range open (0: none).
  void memory(uint64_t us, uint64_t address, int64_t bytes, uint64_t range = 0) {
    writer_.memory({.time_ns = us * 1000, .tid = 1, .address = address, .bytes = bytes, .total_allocated = 0,
                    .total_reserved = 0, .device_type = 0, .device_index = -1, .external_id = range, .stack = nullptr});
  }
  void op(const model::Operator& op, uint64_t record, uint64_t parent, uint32_t depth, uint64_t start_us,
          uint64_t end_us, std::vector<model::Value> inputs = {}) {
    model::OpSpan span{.start_ns = start_us * 1000, .end_ns = end_us * 1000, .record_id = record,
                       .parent_record_id = parent, .depth = depth, .arguments_recorded = !inputs.empty()};
    span.inputs = std::move(inputs);
    writer_.op({1, span, op, nullptr});
  }
  nlohmann::json finish() {
    writer_.finish({});
    out_.commit();
    return nlohmann::json::parse(test::read_trace_text(path_));
  }
  // One training step of a linear layer, every category in it. `step_parent`: a range around
  // Optimizer.step (0: none).
  void training_step(uint64_t step_parent) {
    memory(10, kInput, 64);                            // the batch, made outside every op
    memory(21, kTemporary, 16, 1);                     // linear's scratch, filled and freed inside it
    op(kFill, 2, 1, 1, 21, 22, {tensor(kTemporary, 4), model::Value{.kind = model::ValueKind::kDouble}});
    memory(23, kActivation, 80, 1);                    // linear's output
    memory(24, kTemporary, -16, 1);
    op(kLinear, 1, 0, 0, 20, 30, {tensor(kInput, 16), tensor(kWeight, 100), model::Value{.kind = model::ValueKind::kNone}});
    memory(41, kGradient, 400, 3);                     // the backward pass: the weight's gradient,
    memory(42, kDetail, 32, 3);                        // and a buffer of its own
    op(kMm, 4, 3, 1, 43, 44, {tensor(kActivation, 20), tensor(kDetail, 8)});
    op(kMmBackward, 3, 0, 0, 40, 50);
    memory(50, kNeverATensor, 8);                      // a block no op ever showed
    op(kDetach, 6, 5, 1, 61, 62, {tensor(kGradient, 100)});
    op(kAccumulateGrad, 5, 0, 0, 60, 70);
    memory(75, kDetail, -32);
    memory(76, kActivation, -80);
    const uint32_t depth = step_parent == 0 ? 0 : 1;  // SGD: momentum = momentum * grad; weight += momentum
    op(kMul, 8, 7, depth + 1, 81, 82, {tensor(kMomentum, 100), tensor(kGradient, 100)});
    op(kAdd, 9, 7, depth + 1, 83, 84, {tensor(kWeight, 100), tensor(kMomentum, 100), model::Value{.kind = model::ValueKind::kDouble}});
    op(kOptimizerStep, 7, step_parent, depth, 80, 100);
    if (step_parent != 0) op(kLoop, step_parent, 0, 0, 5, 105);
    memory(110, kInput, -64);
  }

  test::ScratchDirectory scratch_;
  std::filesystem::path path_ = scratch_.path() / "timeline.json";
  OutputFile out_{path_.string()};
  MemoryTimelineWriter writer_{out_, /*html=*/false};
};

// Rows: a leading 0, then parameter, optimizer state, input, temporary, activation, gradient,
// autograd detail, unknown.
TEST_F(TimelineTest, EachStorageGetsTorchsCategoryInTorchsLayout) {
  training_step(/*step_parent=*/0);
  const nlohmann::json timeline = finish();
  EXPECT_EQ(timeline.at(0), nlohmann::json({10, 10, 21, 23, 24, 41, 42, 50, 75, 76, 81, 83, 110}))
      << "what was there before has a row of its own at the first time, as torch writes it";
  const nlohmann::json& rows = timeline.at(1);
  EXPECT_EQ(rows.at(0), nlohmann::json({0, 400, 400, 0, 0, 0, 0, 0, 0}))
      << "the weight (updated in the step, read by the forward pass) and the momentum (updated only in "
         "the step) were there before";
  EXPECT_EQ(rows.at(1), nlohmann::json({0, 400, 400, 64, 0, 0, 0, 0, 0})) << "the batch: an input";
  EXPECT_EQ(rows.at(2), nlohmann::json({0, 400, 400, 64, 16, 0, 0, 0, 0})) << "made and freed in one op: temporary";
  EXPECT_EQ(rows.at(4), nlohmann::json({0, 400, 400, 64, 0, 80, 0, 0, 0})) << "made from an input and a parameter";
  EXPECT_EQ(rows.at(6), nlohmann::json({0, 400, 400, 64, 0, 80, 400, 32, 0}))
      << "AccumulateGrad detaches the gradient; the backward pass's own buffer is autograd detail";
  EXPECT_EQ(rows.at(7), nlohmann::json({0, 400, 400, 64, 0, 80, 400, 32, 8})) << "never a tensor's: unknown";
  EXPECT_EQ(rows.at(12), nlohmann::json({0, 400, 400, 0, 0, 0, 400, 0, 8}));
  for (const auto& row : rows)
    for (const auto& bytes : row) EXPECT_GE(bytes.get<int64_t>(), 0) << row.dump();
}

// torch.optim's step inside the user's own record_function: its ops still count as the step's.
TEST_F(TimelineTest, AnOptimizerStepInsideAnAnnotationStillTellsParametersAndState) {
  training_step(/*step_parent=*/11);
  const nlohmann::json rows = finish().at(1);
  EXPECT_EQ(rows.at(6), nlohmann::json({0, 400, 400, 64, 0, 80, 400, 32, 0}));
}

// Momentum made by the first step (SGD clones the gradient) and freed at exit, outside every
// step: optimizer state, not a parameter; only an op's use outside the steps tells a parameter.
TEST_F(TimelineTest, StateMadeInTheFirstStepAndFreedAtExitIsOptimizerState) {
  const model::Operator clone = aten("aten::clone", {false, false});
  op(kLinear, 1, 0, 0, 20, 30, {tensor(kInput, 16), tensor(kWeight, 100), model::Value{.kind = model::ValueKind::kNone}});
  memory(32, kMomentum, 400, 8);
  op(clone, 8, 7, 1, 31, 33, {tensor(kGradient, 100), model::Value{.kind = model::ValueKind::kNone}});
  op(kAdd, 9, 7, 1, 34, 35, {tensor(kWeight, 100), tensor(kMomentum, 100), model::Value{.kind = model::ValueKind::kDouble}});
  op(kOptimizerStep, 7, 0, 0, 30, 40);
  op(kMul, 11, 10, 1, 51, 52, {tensor(kMomentum, 100), tensor(kGradient, 100)});
  op(kAdd, 12, 10, 1, 53, 54, {tensor(kWeight, 100), tensor(kMomentum, 100), model::Value{.kind = model::ValueKind::kDouble}});
  op(kOptimizerStep, 10, 0, 0, 50, 60);
  memory(70, kMomentum, -400);
  const nlohmann::json timeline = finish();
  const nlohmann::json& rows = timeline.at(1);
  ASSERT_EQ(timeline.at(0).at(1), 32) << "the momentum made";
  EXPECT_EQ(rows.at(1).at(1), 400) << "the weight: a parameter; " << rows.dump();
  EXPECT_EQ(rows.at(1).at(2), 400) << "the momentum: optimizer state; " << rows.dump();
  EXPECT_EQ(rows.back().at(2), 0) << rows.dump();
}

// An address freed and allocated again holds a new storage, with a category of its own.
TEST_F(TimelineTest, AnAddressAllocatedAgainIsANewStorage) {
  memory(10, kInput, 64);
  memory(21, kTemporary, 16, 1);
  op(kFill, 2, 1, 1, 21, 22, {tensor(kTemporary, 4), model::Value{.kind = model::ValueKind::kDouble}});
  memory(24, kTemporary, -16, 1);
  op(kLinear, 1, 0, 0, 20, 30, {tensor(kInput, 16), tensor(kWeight, 100), model::Value{.kind = model::ValueKind::kNone}});
  memory(31, kTemporary, 16);  // again, never a tensor's now
  const nlohmann::json rows = finish().at(1);
  // No gradient, no parameter: the weight (there before) and the batch are unknown.
  EXPECT_EQ(rows.at(2), nlohmann::json({0, 0, 0, 0, 16, 0, 0, 0, 464})) << rows.dump();
  EXPECT_EQ(rows.back(), nlohmann::json({0, 0, 0, 0, 0, 0, 0, 0, 480})) << "not a temporary again: " << rows.dump();
}

}  // namespace
}  // namespace tprof::exporters
