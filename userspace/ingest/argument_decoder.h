// Turns what BPF copied of an op's arguments (op_arguments.h) into model values: tensors
// through the calibrated TensorImpl layout, words through the schema type of their argument.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/trace_model.h"
#include "op_arguments.h"
#include "symbolizer/aten/argument_plan.h"
#include "symbolizer/aten/tensor_impl_layout.h"

namespace tprof {

class ArgumentDecoder {
 public:
  // `plans[op_id]`: the plan each op was probed with. `undefined_tensor_impl`: the target's
  // c10::UndefinedTensorImpl singleton, what a None in a Tensor?[] stands for (0: unknown).
  ArgumentDecoder(symbolizer::TensorImplLayout layout, std::vector<symbolizer::OpArgumentPlan> plans,
                  uint64_t undefined_tensor_impl = 0);

  // The inputs (`returns` false) or returns of op `op_id`: one value per schema argument or
  // return, kUnknown where BPF read nothing. op_id == kAutogradNodeInputs: every argument is a
  // Tensor (a backward node's inputs).
  std::vector<model::Value> decode(uint32_t op_id, bool returns, const op_arguments& arguments) const;

  static constexpr uint32_t kAutogradNodeInputs = UINT32_MAX;

  // Fills in op `op_id`'s `inputs` (as decode gave them) with the arguments its spill probe
  // read (the doubles its entry probe could not).
  void complete(uint32_t op_id, const spilled_arguments& spilled, std::vector<model::Value>& inputs) const;

  // Fills in op `op_id`'s `inputs` from schema argument OP_ARGUMENTS_MAX on with what its
  // OP_RECORD_MORE_ARGUMENTS record read.
  void complete_more(uint32_t op_id, const op_arguments& arguments, std::vector<model::Value>& inputs) const;

  // Appends a list's further elements (an OP_RECORD_LIST_ELEMENTS record) to the list they
  // continue among an op's decoded inputs or returns; false when they continue none (an
  // element before them was lost, or one of theirs does not decode: the list stays partial).
  bool append_list_elements(const list_elements& elements, std::vector<model::Value>& values) const;

  // The layout is derived from libc10's code, never from a table, so the first tensors are its
  // trial: if fewer than half of the first kLayoutTrialTensors windows decode into a plausible
  // tensor (decode_tensor's checks), the layout is judged wrong, every later tensor is left
  // unknown, and this says why. nullopt while the layout holds or is still on trial.
  std::optional<std::string> layout_rejection() const;

  static constexpr uint32_t kLayoutTrialTensors = 64;

 private:
  model::Value decode_one(const argument_value& raw, const op_arguments& arguments, std::string schema_type) const;
  // The tensor in slot `slot`, or nullopt when its bytes do not decode.
  std::optional<model::TensorValue> tensor_at(const op_arguments& arguments, uint32_t slot, bool* defined) const;
  // `copy` decoded, with the sizes and strides of more than 5 dims at `out_of_line` (or none).
  std::optional<model::TensorValue> decoded_tensor(const tensor_copy& copy, const int64_t* out_of_line,
                                                   bool* defined) const;
  model::Value word_value(uint64_t word, const std::string& schema_type) const;
  std::optional<uint64_t> optional_payload(uint64_t word, unsigned payload_bytes) const;

  // Counts the trial's outcomes; the decoder is otherwise stateless, hence mutable.
  void judge_layout(bool plausible) const;

  // A Tensor[] or Tensor?[] argument's elements, an undefined tensor for each None.
  model::Value tensor_list(const argument_value& raw, const op_arguments& arguments) const;
  // append_list_elements for each kind of list: false unless `elements` continue `list`.
  bool append_tensors(const list_elements& elements, model::Value& list) const;
  static bool append_ints(const list_elements& elements, model::Value& list);
  static bool append_doubles(const list_elements& elements, model::Value& list);

  symbolizer::TensorImplLayout layout_;
  std::vector<symbolizer::OpArgumentPlan> plans_;
  uint64_t undefined_tensor_impl_ = 0;
  struct LayoutTrial {
    uint32_t tried = 0;
    uint32_t plausible = 0;
    bool rejected = false;
  };
  mutable LayoutTrial trial_;
};

}  // namespace tprof
