#include "userspace/assemble/range_operators.h"

#include <algorithm>
#include <utility>

#include "symbolizer/aten/identifier_chars.h"
#include "symbolizer/aten/observed_ops.h"

namespace tprof {
namespace {

// profiler_legacy / engine.cpp: the engine's range around each node.
constexpr std::string_view kEvaluateFunctionPrefix = "autograd::engine::evaluate_function: ";
// What a node is called when its vtable names no class tprof can find.
constexpr std::string_view kUnnamedNode = "torch::autograd::Node";

// "ns::name", as c10 names every registered operator.
bool is_operator_name(std::string_view name) {
  const size_t separator = name.find("::");
  if (separator == 0 || separator == std::string_view::npos || separator + 2 == name.size()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return c == ':' || symbolizer::is_identifier_char(c); });
}

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

std::optional<uint32_t> RangeOperators::boxed_op(std::string_view name, std::optional<std::string_view> overload) {
  if (symbolizer::is_unobserved_op(name)) return std::nullopt;
  if (!is_operator_name(name)) {
    ++unnamed_boxed_calls_;
    return std::nullopt;
  }
  std::string key(name);
  if (overload) key += "." + std::string(*overload);
  if (const auto found = boxed_ops_.find(key); found != boxed_ops_.end()) return found->second;
  // A schema begins with the op's full name: "aten::add.Tensor(", "aten::cos(".
  const std::string schema_start = overload && !overload->empty() ? key + "(" : std::string(name) + "(";
  const auto planned = std::find_if(operators_.begin(), operators_.end(), [&](const model::Operator& op) {
    return op.kind == model::RangeKind::kOperator && op.name == name && op.schema.starts_with(schema_start);
  });
  const uint32_t index = overload && planned != operators_.end()
                             ? static_cast<uint32_t>(planned - operators_.begin())
                             : index_of(std::string(name), model::RangeKind::kOperator);
  boxed_ops_.emplace(std::move(key), index);
  return index;
}

}  // namespace tprof
