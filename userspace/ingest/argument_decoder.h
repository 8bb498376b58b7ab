// Turns what BPF copied of an op's arguments (op_arguments.h) into model values: tensors
// through the calibrated TensorImpl layout, words through the schema type of their argument.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/trace_model.h"
#include "op_arguments.h"
#include "symbolizer/aten/argument_plan.h"
#include "symbolizer/aten/tensor_impl_layout.h"

namespace tprof {

class ArgumentDecoder {
 public:
  // `plans[op_id]`: the plan each op was probed with.
  ArgumentDecoder(symbolizer::TensorImplLayout layout, std::vector<symbolizer::OpArgumentPlan> plans);

  // The inputs (`returns` false) or returns of op `op_id`: one value per schema argument or
  // return, kUnknown where BPF read nothing. op_id == kAutogradNodeInputs: every argument is a
  // Tensor (a backward node's inputs).
  std::vector<model::Value> decode(uint32_t op_id, bool returns, const op_arguments& arguments) const;

  static constexpr uint32_t kAutogradNodeInputs = UINT32_MAX;

  // Fills in op `op_id`'s `inputs` (as decode gave them) with the arguments its spill probe
  // read (the doubles its entry probe could not).
  void complete(uint32_t op_id, const spilled_arguments& spilled, std::vector<model::Value>& inputs) const;

 private:
  model::Value decode_one(const argument_value& raw, const op_arguments& arguments, std::string schema_type) const;
  // The tensor in slot `slot`, or nullopt when its bytes do not decode.
  std::optional<model::TensorValue> tensor_at(const op_arguments& arguments, uint32_t slot, bool* defined) const;
  model::Value word_value(uint64_t word, const std::string& schema_type) const;
  std::optional<uint64_t> optional_payload(uint64_t word, unsigned payload_bytes) const;

  symbolizer::TensorImplLayout layout_;
  std::vector<symbolizer::OpArgumentPlan> plans_;
};

}  // namespace tprof
