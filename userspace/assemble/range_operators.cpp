#include "userspace/assemble/range_operators.h"

#include <utility>

namespace tprof {
namespace {

// profiler_legacy / engine.cpp: the engine's range around each node.
constexpr std::string_view kEvaluateFunctionPrefix = "autograd::engine::evaluate_function: ";
// What a node is called when its vtable names no class tprof can find.
constexpr std::string_view kUnnamedNode = "torch::autograd::Node";

}  // namespace

RangeOperators::RangeOperators(std::vector<model::Operator>& operators,
                               std::function<std::string(uint64_t vptr)> node_name)
    : operators_(operators), node_name_(std::move(node_name)) {}

uint32_t RangeOperators::index_of(std::string name, model::RangeKind kind) {
  auto key = std::make_pair(kind, std::move(name));
  if (const auto found = indices_.find(key); found != indices_.end()) return found->second;
  const auto index = static_cast<uint32_t>(operators_.size());
  operators_.push_back(model::Operator{key.second, "", kind, {}, ""});
  indices_.emplace(std::move(key), index);
  return index;
}

uint32_t RangeOperators::annotation(std::string_view name, model::RangeKind kind) {
  return index_of(std::string(name), kind);
}

uint32_t RangeOperators::node(uint64_t vptr, model::RangeKind kind) {
  auto [entry, is_new] = node_operators_.try_emplace(vptr);
  NodeOperators& operators = entry->second;
  if (is_new) {
    operators.name = node_name_(vptr);
    if (operators.name.empty()) operators.name = kUnnamedNode;
  }
  // Indices in order of first use, kind by kind.
  if (kind == model::RangeKind::kBackwardEvaluate) {
    if (!operators.evaluate) operators.evaluate = index_of(std::string(kEvaluateFunctionPrefix) + operators.name, kind);
    return *operators.evaluate;
  }
  if (!operators.node) operators.node = index_of(operators.name, kind);
  return *operators.node;
}

}  // namespace tprof
