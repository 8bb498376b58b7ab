#include "exporters/chrome_input_args.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string_view>

#include "exporters/json_writer.h"

namespace tprof::exporters {
namespace {

using model::Value;
using model::ValueKind;

bool is_scalar_schema_type(std::string_view type) {
  if (type.ends_with('?')) type.remove_suffix(1);
  return type == "int" || type == "SymInt" || type == "float" || type == "bool" || type == "Scalar" ||
         type == "ScalarType" || type == "Layout" || type == "MemoryFormat" || type == "complex";
}

bool is_list_schema_type(std::string_view type) { return type.ends_with(']') || type.ends_with("]?"); }


// Kineto keeps a Tensor[]'s element shapes (collection.cpp, TensorList), not a Tensor?[]'s,
// whose IValue is a generic list. Of a list cut short, the elements read.
bool is_kineto_tensor_list(const Value& input) {
  return input.kind == ValueKind::kTensorList && input.schema_type.starts_with("Tensor[]");
}

// Tensors give their sizes (or strides), a Tensor[] its elements'; everything else gives []
// (util.cpp shapesToStr).
void append_tensor_lists(std::string& out, const std::vector<Value>& inputs, bool strides) {
  out += '[';
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out += ", ";
    const Value& input = inputs[i];
    if (input.kind == ValueKind::kTensor) {
      append_json_integer_list(out, strides ? input.tensor.strides : input.tensor.sizes, ", ");
    } else if (is_kineto_tensor_list(input)) {
      out += '[';
      for (size_t k = 0; k < input.tensors.size(); ++k) {
        if (k > 0) out += ", ";
        append_json_integer_list(out, strides ? input.tensors[k].strides : input.tensors[k].sizes, ", ");
      }
      out += ']';
    } else {
      out += "[]";
    }
  }
  out += ']';
}

// util.cpp inputTypes: a tensor's dtype name, "Scalar" for scalars, "ScalarList" and
// "TensorList" for lists, "" for None, devices, strings, undefined tensors and what tprof could
// not read.
std::string_view input_type(const Value& input) {
  switch (input.kind) {
    case ValueKind::kTensor: return input.tensor.dtype;
    case ValueKind::kTensorList: return input.schema_type.starts_with("Tensor?[]") ? "" : "TensorList";
    case ValueKind::kIntList:
    case ValueKind::kBoolList:
    case ValueKind::kDoubleList: return "ScalarList";
    case ValueKind::kInt:
    case ValueKind::kBool:
    case ValueKind::kDouble: return "Scalar";
    case ValueKind::kNone:
    case ValueKind::kDevice:
    case ValueKind::kString:
    case ValueKind::kObject:
    case ValueKind::kUndefinedTensor: return "";
    case ValueKind::kUnknown: break;
  }
  // Not read, but the schema still says what kind of value it is.
  if (input.schema_type.starts_with("Tensor[]")) return "TensorList";
  if (is_list_schema_type(input.schema_type) && !input.schema_type.starts_with("Tensor")) return "ScalarList";
  if (is_scalar_schema_type(input.schema_type)) return "Scalar";
  return "";
}

// How an IValue prints a double (ivalue.cpp, IValue::repr): an integral value under 1e10 as the
// integer and a "." ("2.", "-0."); anything else with max_digits10 (17) significant digits, as
// %.17g writes them ("0.90000000000000002", "1e-08", "inf"). Shortest round-trip digits ("0.9")
// would be the same number in other text, which tools comparing with torch's trace count as
// a different value.
std::string double_text(double value) {
  const int kind = std::fpclassify(value);
  if ((kind == FP_NORMAL || kind == FP_ZERO) && std::abs(value) < 1e10) {
    const auto integral = static_cast<int64_t>(value);
    if (static_cast<double>(integral) == value)
      return (integral == 0 && std::signbit(value) ? "-" : "") + std::to_string(integral) + ".";
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

// "[a, b, c]" of a list's elements as `text_of` spells them; a list cut short ends in ", ...]"
// ("[...]" with no element read), as Kineto spells the lists it truncates (format_list).
template <typename Elements, typename TextOf>
std::string list_text(const Elements& elements, bool cut_short, TextOf text_of) {
  std::string text = "[";
  for (size_t i = 0; i < elements.size(); ++i) text += (i > 0 ? ", " : "") + text_of(elements[i]);
  if (cut_short) text += elements.empty() ? "..." : ", ...";
  return text + "]";
}

// util.cpp ivalueToStr: the value for ints, bools, floats and int, bool and float lists; "" for
// tensors, devices, strings, None and what was not read.
std::string concrete_input(const Value& input) {
  const bool cut_short = model::is_partial_list(input);
  switch (input.kind) {
    case ValueKind::kInt: return std::to_string(input.ints.at(0));
    case ValueKind::kBool: return input.boolean ? "True" : "False";
    case ValueKind::kDouble: return double_text(input.real);
    case ValueKind::kIntList:  // "[2, 2]"
      return list_text(input.ints, cut_short, [](int64_t value) { return std::to_string(value); });
    case ValueKind::kDoubleList:  // "[0.063198132875900398, 0.9]"
      return list_text(input.reals, cut_short, double_text);
    case ValueKind::kBoolList:  // "[True, True, False]"
      return list_text(input.ints, cut_short, [](int64_t value) { return std::string(value != 0 ? "True" : "False"); });
    default: return "";
  }
}

}  // namespace

void append_input_args(std::string& out, const std::vector<Value>& inputs) {
  // One string per input, as `text_of` spells it.
  auto append_strings = [&](auto text_of) {
    out += '[';
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (i > 0) out += ", ";
      append_json_string(out, text_of(inputs[i]));
    }
    out += ']';
  };
  out += ", \"Input Dims\": ";
  append_tensor_lists(out, inputs, /*strides=*/false);
  out += ", \"Input type\": ";
  append_strings(input_type);
  out += ", \"Input Strides\": ";
  append_tensor_lists(out, inputs, /*strides=*/true);
  out += ", \"Concrete Inputs\": ";
  append_strings(concrete_input);
  // tprof's own key, only where a list was cut short: which, and how much of it was read.
  if (std::any_of(inputs.begin(), inputs.end(), model::is_partial_list)) {
    out += ", \"Inputs read in part\": ";
    append_strings([](const Value& input) { return model::is_partial_list(input) ? model::unread_part(input) : ""; });
  }
}

std::string input_dims_text(const std::vector<Value>& inputs) {
  std::string text;
  append_tensor_lists(text, inputs, /*strides=*/false);
  return text;
}

}  // namespace tprof::exporters
