// The Execution Trace rules of tests/support/trace_validator.h: what tprof's value writer gives
// passes them, torch's own forms pass them, and a placeholder or a value of another form than
// its type fails, as et_replay would on it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "exporters/execution_trace_values.h"
#include "model/trace_model.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

using model::Value;
using model::ValueKind;

// An ET holding one node whose inputs are `inputs` (JSON text of the four arrays).
nlohmann::json et_with_inputs(const std::string& inputs) {
  const std::string empty = R"json({"values": [], "shapes": [], "types": [], "strides": []})json";
  return nlohmann::json::parse(R"json({"nodes": [{"name": "aten::op", "inputs": )json" + inputs + R"json(, "outputs": )json" + empty + "}]}");
}

std::string rules_of(const std::vector<std::string>& violations) {
  std::string rules;
  for (const std::string& violation : violations) rules += violation.substr(0, violation.find(']') + 1);
  return rules;
}

TEST(ExecutionTraceValidator, AcceptsWhatTheValueWriterGivesForEveryReadKind) {
  model::TensorValue tensor{.impl_address = 0x10, .storage_address = 0x20, .sizes = {2}, .strides = {1},
                            .numel = 2, .dtype = "float", .itemsize = 4, .device = "cpu"};
  const std::vector<Value> values = {
      {.kind = ValueKind::kTensor, .tensor = tensor},
      {.kind = ValueKind::kInt, .ints = {3}},
      {.kind = ValueKind::kDouble, .real = 0.1},
      {.kind = ValueKind::kDouble, .real = 1.0 / 0.0},
      {.kind = ValueKind::kBool, .boolean = true},
      {.kind = ValueKind::kNone},
      {.kind = ValueKind::kDevice, .text = "cuda:0"},
      {.kind = ValueKind::kString, .text = "tanh"},
      {.kind = ValueKind::kObject, .text = "Generator"},
      {.kind = ValueKind::kIntList, .ints = {1, 2}, .list_length = 2},
      {.kind = ValueKind::kBoolList, .ints = {1, 0, 1}, .list_length = 3},
      {.kind = ValueKind::kTensorList, .tensors = {tensor, tensor}, .list_length = 2},
  };
  uint64_t next_id = 1;
  exporters::TensorIds ids(next_id);
  std::string inputs;
  exporters::append_execution_trace_values(inputs, values, ids);
  EXPECT_EQ(validate_execution_trace(et_with_inputs(inputs)), std::vector<std::string>{}) << inputs;
}

TEST(ExecutionTraceValidator, AcceptsTorchsOwnForms) {
  // From torch 2.6's ExecutionTraceObserver (aten::empty and aten::native_layer_norm_backward).
  const nlohmann::json et = et_with_inputs(
      R"json({"values": [[0], 6, 0, "cpu", "<None>", [true, true, true], [[5,6,0,4,4,"cpu"]]],
          "shapes": [[[]], [], [], [], [], [[],[],[]], [[4]]],
          "types": ["GenericList[Int]", "Int", "Int", "Device", "None", "GenericList[Bool,Bool,Bool]",
                    "GenericList[Tensor(float)]"],
          "strides": [[[]], [], [], [], [], [[],[],[]], [[1]]]})json");
  EXPECT_EQ(validate_execution_trace(et), std::vector<std::string>{});
}

TEST(ExecutionTraceValidator, FlagsAPlaceholderWhereTorchRecordsAValue) {
  uint64_t next_id = 1;
  exporters::TensorIds ids(next_id);
  std::string inputs;
  exporters::append_execution_trace_values(inputs, {Value{.kind = ValueKind::kUnknown, .schema_type = "float"}}, ids);
  EXPECT_EQ(rules_of(validate_execution_trace(et_with_inputs(inputs))), "[et-placeholder]");
}

TEST(ExecutionTraceValidator, FlagsValuesOfAnotherFormThanTheirType) {
  for (const std::string& inputs :
       {std::string(R"json({"values": [1.5], "shapes": [[]], "types": ["Int"], "strides": [[]]})json"),
        std::string(R"json({"values": ["1"], "shapes": [[]], "types": ["Bool"], "strides": [[]]})json"),
        std::string(R"json({"values": [[1]], "shapes": [[]], "types": ["GenericList[Int,Int]"], "strides": [[]]})json"),
        std::string(R"json({"values": [[1,2,0,4]], "shapes": [[]], "types": ["Tensor(float)"], "strides": [[]]})json"),
        std::string(R"json({"values": [null], "shapes": [[]], "types": ["None"], "strides": [[]]})json")}) {
    SCOPED_TRACE(inputs);
    EXPECT_EQ(rules_of(validate_execution_trace(et_with_inputs(inputs))), "[et-value-type]");
  }
}

TEST(ExecutionTraceValidator, FlagsArraysThatDoNotRunInParallel) {
  const nlohmann::json et = et_with_inputs(R"json({"values": [1, 2], "shapes": [[]], "types": ["Int", "Int"], "strides": [[]]})json");
  EXPECT_EQ(rules_of(validate_execution_trace(et)), "[et-arrays]");
}

}  // namespace
}  // namespace tprof::test
