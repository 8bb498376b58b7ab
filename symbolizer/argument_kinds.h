// A coarse picture of an op's arguments, comparable between a schema text and the C++ signature
// of at::_ops::<op>::call: how many there are and which are tensors or tensor lists. Enough to
// tell "sin(Tensor self)" from "sin(Tensor[] self)" (a _foreach_sin tail) when both are found.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace tprof::symbolizer {

enum class ArgumentKind { kTensor, kTensorList, kOther };

// From a schema text: "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" gives
// {kTensor, kTensor, kOther}. nullopt if the argument list is not closed.
std::optional<std::vector<ArgumentKind>> schema_argument_kinds(std::string_view schema);

// From the mangled call symbol, whose parameters follow the schema's argument order (torchgen's
// "faithful" signature). nullopt if it does not demangle to a function.
std::optional<std::vector<ArgumentKind>> call_parameter_kinds(const char* mangled_symbol);

}  // namespace tprof::symbolizer
