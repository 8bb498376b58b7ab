// An op's argument lists as its schema text and the C++ signature of at::_ops::<op>::call spell
// them, and a coarse picture of them comparable between the two: how many there are and which
// are tensors or tensor lists. Enough to tell "sin(Tensor self)" from "sin(Tensor[] self)" (a
// _foreach_sin tail) when both are found.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tprof::symbolizer {

// One schema argument or return, as written: "Tensor(a!) out" is {"Tensor(a!)", "out"}; a return
// may be unnamed ("-> Tensor" is {"Tensor", ""}). Views into the schema text.
struct SchemaArgument {
  std::string_view type;  // alias annotations kept: "Tensor(a!)", "Tensor(a -> *)", "int[2]"
  std::string_view name;
};

// "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" gives self, other, alpha
// (the "*" before keyword-only arguments is left out). nullopt if the argument list is not closed.
std::optional<std::vector<SchemaArgument>> schema_arguments(std::string_view schema);

// "... -> (Tensor(a!) values, Tensor(b!) indices)" gives values, indices; "-> Tensor" one unnamed
// return; "-> ()" none. nullopt if the argument list is not closed or no "->" follows it.
std::optional<std::vector<SchemaArgument>> schema_returns(std::string_view schema);

// The parameter types of a mangled call symbol, demangled: "at::Tensor const&",
// "c10::ArrayRef<long>", ... nullopt if it does not demangle to a function.
std::optional<std::vector<std::string>> call_parameter_types(const char* mangled_symbol);

// Per argument, whether the schema marks it written in place (an alias annotation with `!`:
// "Tensor(a!) self", "Tensor(a!)[] out"). Empty if the argument list is not closed.
std::vector<bool> written_arguments(std::string_view schema);

enum class ArgumentKind { kTensor, kTensorList, kOther };

// From a schema text: "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" gives
// {kTensor, kTensor, kOther}. nullopt if the argument list is not closed.
std::optional<std::vector<ArgumentKind>> schema_argument_kinds(std::string_view schema);

// From the mangled call symbol, whose parameters follow the schema's argument order (torchgen's
// "faithful" signature). nullopt if it does not demangle to a function.
std::optional<std::vector<ArgumentKind>> call_parameter_kinds(const char* mangled_symbol);

}  // namespace tprof::symbolizer
