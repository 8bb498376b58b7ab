// --memory-timeline: torch's [times, sizes] layout, and categories from what the ops did to
// each storage: written inside Optimizer.step and read outside (parameter), written only there
// (optimizer state), read only there (gradient); the rest unknown; storages there before the
// recording counted from its first time at the size the ops showed.
#include "exporters/memory_timeline_writer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/process_harness.h"
#include "tests/support/trace_validator.h"

namespace tprof::exporters {
namespace {

model::Value tensor(uint64_t storage, int64_t elements, model::Dims strides = {1}) {
  model::Value value;
  value.kind = model::ValueKind::kTensor;
  value.tensor.storage_address = storage;
  value.tensor.sizes = {elements};
  value.tensor.strides = std::move(strides);
  value.tensor.numel = elements;
  value.tensor.itemsize = 4;
  value.tensor.device = "cpu";
  return value;
}

constexpr uint64_t kWeight = 0x1000, kMomentum = 0x2000, kGradient = 0x3000, kTemporary = 0x4000, kBias = 0x5000;

TEST(MemoryTimelineWriter, CategoriesFollowWhatTheOpsDidAndTheLayoutIsTorchs) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "timeline.json";
  OutputFile out(path.string());
  MemoryTimelineWriter writer(out, /*html=*/false);
  const model::Operator linear{"aten::linear", ""}, add_{"aten::add_", ""}, mul_{"aten::mul_", ""};
  const model::Operator step{"Optimizer.step#SGD.step", "", model::RangeKind::kUserAnnotation};
  const auto memory = [&](uint64_t us, uint64_t address, int64_t bytes) {
    writer.memory({.time_ns = us * 1000, .tid = 1, .address = address, .bytes = bytes, .total_allocated = 0,
                   .total_reserved = 0, .device_type = 0, .device_index = -1, .external_id = 0, .stack = nullptr});
  };
  memory(10, kGradient, 400);
  memory(20, kTemporary, 64);
  // The forward pass reads the weight, and a bias broadcast over 8 rows (stride 0: 40 bytes).
  model::OpSpan forward{.start_ns = 15'000, .end_ns = 16'000, .record_id = 1, .depth = 0, .arguments_recorded = true};
  forward.inputs = {tensor(kWeight, 100), tensor(kBias, 80, {0})};
  forward.inputs[1].tensor.sizes = {8, 10};
  forward.inputs[1].tensor.strides = {0, 1};
  writer.op({1, forward, linear, nullptr});
  memory(30, kTemporary, -64);
  // Optimizer.step: momentum *= m (in place); weight += momentum (in place, reading it); the
  // gradient is read.
  model::OpSpan scale{.start_ns = 41'000, .end_ns = 42'000, .record_id = 3, .depth = 1, .arguments_recorded = true};
  scale.inputs = {tensor(kMomentum, 100), tensor(kGradient, 100)};
  model::OpSpan update{.start_ns = 43'000, .end_ns = 44'000, .record_id = 4, .depth = 1, .arguments_recorded = true};
  update.inputs = {tensor(kWeight, 100), tensor(kMomentum, 100)};
  writer.op({1, scale, mul_, nullptr});
  writer.op({1, update, add_, nullptr});
  writer.op({1, model::OpSpan{.start_ns = 40'000, .end_ns = 45'000, .record_id = 2, .depth = 0}, step, nullptr});
  writer.finish({});
  out.commit();

  const nlohmann::json timeline = nlohmann::json::parse(test::read_trace_text(path));
  // Rows: a leading 0, then parameter, optimizer state, input, temporary, activation, gradient,
  // autograd detail, unknown.
  EXPECT_EQ(timeline.at(0), nlohmann::json({10, 20, 30}));
  EXPECT_EQ(timeline.at(1).at(0), nlohmann::json({0, 400, 400, 0, 0, 0, 400, 0, 40}))
      << "the weight, the momentum and the bias were there before; the gradient came at 10 us";
  EXPECT_EQ(timeline.at(1).at(1), nlohmann::json({0, 400, 400, 0, 0, 0, 400, 0, 104}));
  EXPECT_EQ(timeline.at(1).at(2), nlohmann::json({0, 400, 400, 0, 0, 0, 400, 0, 40}));
}

// torch.optim's step inside the user's own record_function: its ops still count as the step's.
TEST(MemoryTimelineWriter, AnOptimizerStepInsideAnAnnotationStillTellsParameters) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "timeline.json";
  OutputFile out(path.string());
  MemoryTimelineWriter writer(out, /*html=*/false);
  const model::Operator linear{"aten::linear", ""}, add_{"aten::add_", ""};
  const model::Operator loop{"## LOOP 0 ##", "", model::RangeKind::kUserAnnotation};
  const model::Operator step{"Optimizer.step#SGD.step", "", model::RangeKind::kUserAnnotation};
  model::OpSpan forward{.start_ns = 2'000, .end_ns = 3'000, .record_id = 2, .depth = 1, .arguments_recorded = true};
  forward.inputs = {tensor(kWeight, 100)};
  model::OpSpan update{.start_ns = 5'000, .end_ns = 6'000, .record_id = 4, .depth = 2, .arguments_recorded = true};
  update.inputs = {tensor(kWeight, 100), tensor(kMomentum, 100)};
  writer.op({1, forward, linear, nullptr});
  writer.op({1, update, add_, nullptr});
  writer.op({1, model::OpSpan{.start_ns = 4'000, .end_ns = 7'000, .record_id = 3, .depth = 1}, step, nullptr});
  writer.op({1, model::OpSpan{.start_ns = 1'000, .end_ns = 8'000, .record_id = 1, .depth = 0}, loop, nullptr});
  writer.finish({});
  out.commit();
  const nlohmann::json timeline = nlohmann::json::parse(test::read_trace_text(path));
  EXPECT_EQ(timeline.at(1).at(0), nlohmann::json({0, 400, 0, 0, 0, 0, 400, 0, 0}))
      << "the weight, written in the step and read outside it, a parameter; the other storage, only read "
         "inside the step, a gradient";
}

}  // namespace
}  // namespace tprof::exporters
