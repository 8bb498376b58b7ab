#include "exporters/execution_trace_values.h"

#include <cmath>
#include <string_view>

#include "exporters/json_writer.h"

namespace tprof::exporters {
namespace {

using model::TensorValue;

// What tprof writes for a value it could not read, in place of convertIValue's forms. Its
// node goes without an op_schema (execution_trace_writer.cpp), so replayers leave it out.
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

class ValueFormatter {
 public:
  ValueFormatter(const std::vector<Value>& values, TensorIds* ids) : values_(values), ids_(ids) {}

  void append_values(std::string& out) {
    out += "{\"values\": [";
    for_each(out, [&](const Value& value) { append_value(out, value); });
    out += ']';
  }

  void append_shapes_types_strides(std::string& out) {
    out += ", \"shapes\": [";
    for_each(out, [&](const Value& value) { append_shape(out, value, /*strides=*/false); });
    out += "], \"types\": [";
    for_each(out, [&](const Value& value) { append_type(out, value); });
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
    append_json_integer(out, ids_->tensor(tensor.impl_address));
    out += ',';
    append_json_integer(out, tensor.storage_address == 0 ? 0 : ids_->storage(tensor.storage_address));
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
      case ValueKind::kBoolList:
        out += '[';
        for (size_t i = 0; i < value.ints.size(); ++i) {
          if (i > 0) out += ',';
          out += value.ints[i] != 0 ? "true" : "false";
        }
        out += ']';
        return;
      case ValueKind::kDoubleList:
        out += '[';
        for (size_t i = 0; i < value.reals.size(); ++i) {
          if (i > 0) out += ',';
          append_double(out, value.reals[i]);
        }
        out += ']';
        return;
      case ValueKind::kDevice:
      case ValueKind::kString: append_json_string(out, value.text); return;
      case ValueKind::kObject: append_json_string(out, "<" + value.text + ">"); return;  // convertIValue's "<TagKind>"
      case ValueKind::kInt: append_json_integer(out, value.ints.at(0)); return;
      case ValueKind::kBool: out += value.boolean ? "true" : "false"; return;
      case ValueKind::kDouble: append_double(out, value.real); return;
      case ValueKind::kNone: append_json_string(out, "<None>"); return;
      case ValueKind::kUndefinedTensor:
        // torch: an id for the (singleton) TensorImpl, and no storage, size or device.
        out += '[';
        append_json_integer(out, ids_->tensor(value.tensor.impl_address));
        out += ",0,0,0,0,\"\"]";
        return;
      case ValueKind::kUnknown: append_json_string(out, kUnknownValue); return;
    }
  }

  // getScalarValue: std::to_string, quoted when it is not a JSON number ("inf", "-inf", "nan").
  static void append_double(std::string& out, double value) {
    if (std::isfinite(value)) {
      out += std::to_string(value);
    } else {
      append_json_string(out, std::to_string(value));
    }
  }

  void append_shape(std::string& out, const Value& value, bool strides) {
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
      case ValueKind::kIntList:
      case ValueKind::kBoolList: append_empty_lists(out, value.ints.size()); return;
      case ValueKind::kDoubleList: append_empty_lists(out, value.reals.size()); return;
      default: out += "[]"; return;
    }
  }

  // convertIValue's type strings, quoted; values tprof could not read say so instead of guessing.
  static void append_type(std::string& out, const Value& value) {
    out += '"';
    switch (value.kind) {
      case ValueKind::kTensor: append_tensor_type(out, value.tensor); break;
      case ValueKind::kTensorList:
        out += "GenericList[";
        for (size_t i = 0; i < value.tensors.size(); ++i) {
          if (i > 0) out += ',';
          append_tensor_type(out, value.tensors[i]);
        }
        out += ']';
        break;
      case ValueKind::kIntList:
        out += "GenericList[";
        for (size_t i = 0; i < value.ints.size(); ++i) out += i > 0 ? ",Int" : "Int";
        out += ']';
        break;
      case ValueKind::kBoolList:
        out += "GenericList[";
        for (size_t i = 0; i < value.ints.size(); ++i) out += i > 0 ? ",Bool" : "Bool";
        out += ']';
        break;
      case ValueKind::kDoubleList:
        out += "GenericList[";
        for (size_t i = 0; i < value.reals.size(); ++i) out += i > 0 ? ",Double" : "Double";
        out += ']';
        break;
      case ValueKind::kDevice: out += "Device"; break;
      case ValueKind::kString: out += "String"; break;
      case ValueKind::kObject: out += value.text; break;
      case ValueKind::kInt: out += "Int"; break;
      case ValueKind::kBool: out += "Bool"; break;
      case ValueKind::kDouble: out += "Double"; break;
      case ValueKind::kNone: out += "None"; break;
      case ValueKind::kUndefinedTensor: out += "Tensor(nullptr (uninitialized))"; break;  // TypeMeta's name for no dtype
      case ValueKind::kUnknown: out += kUnknownType; break;
    }
    out += '"';
  }

  // "Tensor(<dtype>)", inside the quotes: dtype names are plain ASCII caffe2 names.
  static void append_tensor_type(std::string& out, const TensorValue& tensor) {
    out += "Tensor(";
    const size_t start = out.size();
    append_json_string(out, tensor.dtype);  // escaped all the same, then unquoted
    out.erase(start, 1);
    out.pop_back();
    out += ')';
  }

  const std::vector<Value>& values_;
  TensorIds* ids_;  // null when only shapes, types and strides are appended
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
  append_execution_trace_value_list(out, values, ids);
  append_execution_trace_shapes_types_strides(out, values);
}

void append_execution_trace_value_list(std::string& out, const std::vector<Value>& values, TensorIds& ids) {
  ValueFormatter(values, &ids).append_values(out);
}

void append_execution_trace_shapes_types_strides(std::string& out, const std::vector<Value>& values) {
  ValueFormatter(values, nullptr).append_shapes_types_strides(out);
}

}  // namespace tprof::exporters
