// Grows the operator table with the named ranges met while recording: record_function()
// names, autograd node classes and the ops called through the boxed dispatcher. Ops have their
// ids from the probe plan; these get theirs on first sight, after the ops.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "model/trace_model.h"

namespace tprof {

class RangeOperators {
 public:
  // `node_name` names the class of a node from its vtable pointer as torch's profiler does
  // ("MmBackward0", "torch::autograd::AccumulateGrad"), or returns "" when it cannot.
  RangeOperators(std::vector<model::Operator>& operators, std::function<std::string(uint64_t vptr)> node_name);

  // kUserAnnotation: record_function("name"); kFunctionRange: a range C code names (dynamo's).
  uint32_t annotation(std::string_view name, model::RangeKind kind = model::RangeKind::kUserAnnotation);
  // kBackwardEvaluate: "autograd::engine::evaluate_function: <node>"; kBackwardNode: "<node>".
  uint32_t node(uint64_t vptr, model::RangeKind kind);
  // An op called through the boxed dispatcher, by its c10::OperatorName ("aten::add", "Tensor";
  // "" for the default overload): the planned op of that schema when there is one, so that it
  // shares the op's index and schema; else an operator of that name without a schema, as for an
  // overload packet's call (`overload` none: the overload it ran is not known). None, no range,
  // for an op torch never observes (symbolizer/aten/observed_ops.h), and for an empty or
  // malformed name: a JIT-only operator's (torch.ops.prim.abs), whose torch::jit::Operator holds
  // no dispatcher entry where the name is read (bpf/boxed_operators.bpf.h), and which torch's
  // profiler does not record either (it never reaches the dispatcher); those are counted.
  std::optional<uint32_t> boxed_op(std::string_view name, std::optional<std::string_view> overload);
  uint64_t unnamed_boxed_calls() const { return unnamed_boxed_calls_; }

 private:
  uint32_t index_of(std::string name, model::RangeKind kind);

  std::vector<model::Operator>& operators_;
  std::function<std::string(uint64_t)> node_name_;
  std::map<std::pair<model::RangeKind, std::string>, uint32_t, std::less<>> indices_;
  // Per vptr, its name and, once used, its evaluate_function and node operator indices: a
  // backward record then costs one lookup, not a name built and searched for.
  struct NodeOperators {
    std::string name;
    std::optional<uint32_t> evaluate;
    std::optional<uint32_t> node;
  };
  std::unordered_map<uint64_t, NodeOperators> node_operators_;
  // Boxed ops by "name" (overload unknown) or "name.overload" ("name." for the default).
  std::unordered_map<std::string, uint32_t> boxed_ops_;
  uint64_t unnamed_boxed_calls_ = 0;
};

}  // namespace tprof
