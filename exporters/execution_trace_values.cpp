#include "exporters/execution_trace_values.h"

#include <cmath>
#include <string_view>

#include "exporters/json_writer.h"

namespace tprof::exporters {
namespace {

using model::TensorValue;

// What tprof writes for a value it could not read, in place of convertIValue's forms.
constexpr std::string_view kUnknownValue = "<Unknown>";
constexpr const char* kUnknownType = "Unknown";
using model::Value;
using model::ValueKind;


// "[]"-per-element lists of a list value, as torch nests shapes and strides of list elements.
void append_empty_lists(std::string& out, size_t count) {
  out += '[';
  for (size_t i = 0; i < count; ++i) out += i > 0 ? ",[]" : "[]";
  out += ']';
}

// A list of which BPF copied only the first elements: written as unknown, not cut short.
bool is_partial_list(const Value& value) {
  return (value.kind == ValueKind::kIntList && value.ints.size() != value.list_length) ||
         (value.kind == ValueKind::kTensorList && value.tensors.size() != value.list_length);
}

class ValueFormatter {
 public:
  ValueFormatter(const std::vector<Value>& values, TensorIds& ids) : values_(values), ids_(ids) {}

  void append(std::string& out) {
    out += "{\"values\": [";
    for_each(out, [&](const Value& value) { append_value(out, value); });
    out += "], \"shapes\": [";
    for_each(out, [&](const Value& value) { append_shape(out, value, /*strides=*/false); });
    out += "], \"types\": [";
    for_each(out, [&](const Value& value) { append_json_string(out, type_of(value)); });
    out += "], \"strides\": [";
    for_each(out, [&](const Value& value) { append_shape(out, value, /*strides=*/true); });
    out += "]}";
  }

 private:
  template <typename Visit>
  void for_each(std::string& out, Visit visit) {
    for (size_t i = 0; i < values_.size(); ++i) {
      if (i > 0) out += ", ";
      visit(values_[i]);
    }
  }

  // [tensor_id, storage_id, offset, numel, itemsize, device]; a tensor without storage gets
  // storage id 0, as torch writes it.
  void append_tensor(std::string& out, const TensorValue& tensor) {
    out += '[';
    append_json_integer(out, ids_.tensor(tensor.impl_address));
    out += ',';
    append_json_integer(out, tensor.storage_address == 0 ? 0 : ids_.storage(tensor.storage_address));
    out += ',';
    append_json_integer(out, tensor.storage_offset);
    out += ',';
    append_json_integer(out, tensor.numel);
    out += ',';
    append_json_integer(out, tensor.itemsize);
    out += ',';
    append_json_string(out, tensor.device);
    out += ']';
  }

  void append_value(std::string& out, const Value& value) {
    if (is_partial_list(value)) {
      append_json_string(out, kUnknownValue);
      return;
    }
    switch (value.kind) {
      case ValueKind::kTensor: append_tensor(out, value.tensor); return;
      case ValueKind::kTensorList:
        out += '[';
        for (size_t i = 0; i < value.tensors.size(); ++i) {
          if (i > 0) out += ',';
          append_tensor(out, value.tensors[i]);
        }
        out += ']';
        return;
      case ValueKind::kIntList: append_json_integer_list(out, value.ints, ","); return;
      case ValueKind::kInt: append_json_integer(out, value.ints.at(0)); return;
      case ValueKind::kBool: out += value.boolean ? "true" : "false"; return;
      case ValueKind::kDouble:
        // getScalarValue: std::to_string, quoted when it is not a JSON number ("inf", "-inf",
        // "nan").
        if (std::isfinite(value.real)) {
          out += std::to_string(value.real);
        } else {
          append_json_string(out, std::to_string(value.real));
        }
        return;
      case ValueKind::kNone: append_json_string(out, "<None>"); return;
      case ValueKind::kUndefinedTensor:
        // torch: an id for the (singleton) TensorImpl, and no storage, size or device.
        out += '[';
        append_json_integer(out, ids_.tensor(value.tensor.impl_address));
        out += ",0,0,0,0,\"\"]";
        return;
      case ValueKind::kUnknown: append_json_string(out, kUnknownValue); return;
    }
  }

  void append_shape(std::string& out, const Value& value, bool strides) {
    if (is_partial_list(value)) {
      out += "[]";
      return;
    }
    switch (value.kind) {
      case ValueKind::kTensor:
        append_json_integer_list(out, strides ? value.tensor.strides : value.tensor.sizes, ",");
        return;
      case ValueKind::kTensorList:
        out += '[';
        for (size_t i = 0; i < value.tensors.size(); ++i) {
          if (i > 0) out += ',';
          append_json_integer_list(out, strides ? value.tensors[i].strides : value.tensors[i].sizes, ",");
        }
        out += ']';
        return;
      case ValueKind::kIntList: append_empty_lists(out, value.ints.size()); return;
      default: out += "[]"; return;
    }
  }

  // convertIValue's type strings; values tprof could not read say so instead of guessing.
  static std::string type_of(const Value& value) {
    if (is_partial_list(value)) return kUnknownType;
    switch (value.kind) {
      case ValueKind::kTensor: return "Tensor(" + value.tensor.dtype + ")";
      case ValueKind::kTensorList: {
        std::string type = "GenericList[";
        for (size_t i = 0; i < value.tensors.size(); ++i) {
          if (i > 0) type += ',';
          type += "Tensor(" + value.tensors[i].dtype + ")";
        }
        return type + "]";
      }
      case ValueKind::kIntList: {
        std::string type = "GenericList[";
        for (size_t i = 0; i < value.ints.size(); ++i) type += i > 0 ? ",Int" : "Int";
        return type + "]";
      }
      case ValueKind::kInt: return "Int";
      case ValueKind::kBool: return "Bool";
      case ValueKind::kDouble: return "Double";
      case ValueKind::kNone: return "None";
      case ValueKind::kUndefinedTensor: return "Tensor(nullptr (uninitialized))";  // TypeMeta's name for no dtype
      case ValueKind::kUnknown: break;
    }
    return kUnknownType;
  }

  const std::vector<Value>& values_;
  TensorIds& ids_;
};

}  // namespace

uint64_t TensorIds::Generations::id_of(uint64_t address, uint64_t& next_id) {
  if (const auto found = current.find(address); found != current.end()) return found->second;
  uint64_t id = 0;
  if (const auto found = previous.find(address); found != previous.end()) {
    id = found->second;  // still in use: carried into the current generation
  } else {
    id = next_id++;
  }
  if (current.size() >= kGeneration) {
    previous = std::move(current);
    current.clear();
  }
  current.emplace(address, id);
  return id;
}

void append_execution_trace_values(std::string& out, const std::vector<Value>& values, TensorIds& ids) {
  ValueFormatter(values, ids).append(out);
}

}  // namespace tprof::exporters
