// Grows the operator table with the named ranges met while recording: record_function()
// names and autograd node classes. Ops have their ids from the probe plan; these get theirs
// on first sight, after the ops.
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
};

}  // namespace tprof
