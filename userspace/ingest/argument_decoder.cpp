#include "userspace/ingest/argument_decoder.h"

#include <bit>
#include <string_view>

#include "symbolizer/aten/scalar_types.h"
#include "symbolizer/aten/tensor_decoder.h"

namespace tprof {
namespace {

using model::Value;
using model::ValueKind;

// c10::SymInt keeps a plain integer inline unless its top bits mark a pointer to a symbolic
// node (c10/core/SymInt.h: MASK and IS_SYM).
constexpr uint64_t kSymIntMask = (1ULL << 63) | (1ULL << 62) | (1ULL << 61);
constexpr uint64_t kSymIntIsSymbolic = (1ULL << 63) | (1ULL << 61);

// c10::Scalar's tag values that are the same in every torch version tprof knows (1.13: HAS_d,
// HAS_i, HAS_z, HAS_b...; 2.x inserted HAS_u after HAS_i): the rest are left unknown.
constexpr uint32_t kScalarTagDouble = 0;
constexpr uint32_t kScalarTagInt = 1;

Value int_value(int64_t value) {
  Value result;
  result.kind = ValueKind::kInt;
  result.ints = {value};
  return result;
}

bool is_symbolic(uint64_t word) { return (word & kSymIntMask) == kSymIntIsSymbolic; }

std::string_view without_optional(std::string_view type) {
  if (type.ends_with('?')) type.remove_suffix(1);
  return type;
}

// Schema types passed as one-byte enums (possibly optional) in an integer register.
bool is_small_enum(std::string_view type) {
  type = without_optional(type);
  return type == "ScalarType" || type == "Layout" || type == "MemoryFormat" || type == "bool";
}

}  // namespace

ArgumentDecoder::ArgumentDecoder(symbolizer::TensorImplLayout layout, std::vector<symbolizer::OpArgumentPlan> plans)
    : layout_(std::move(layout)), plans_(std::move(plans)) {}

std::optional<model::TensorValue> ArgumentDecoder::tensor_at(const op_arguments& arguments, uint32_t slot,
                                                            bool* defined) const {
  if (slot >= arguments.tensor_count || slot >= OP_TENSORS_MAX) return std::nullopt;
  // __s64 is long long, int64_t long: the same 8 bytes under two names.
  const int64_t* out_of_line =
      arguments.out_of_line_tensor == slot ? reinterpret_cast<const int64_t*>(arguments.out_of_line) : nullptr;
  const auto decoded = symbolizer::decode_tensor(arguments.tensors[slot], out_of_line, layout_);
  if (!decoded) return std::nullopt;
  *defined = decoded->defined;
  model::TensorValue tensor;
  tensor.impl_address = decoded->impl;
  if (!decoded->defined) return tensor;
  tensor.storage_address = decoded->storage_data;
  static_assert(decltype(tensor.sizes)::static_capacity == decltype(decoded->sizes)::static_capacity);
  tensor.sizes = decoded->sizes;
  tensor.strides = decoded->strides;
  tensor.storage_offset = decoded->storage_offset;
  tensor.numel = decoded->numel;
  tensor.dtype = std::string(symbolizer::caffe2_type_name(decoded->scalar_type));
  tensor.itemsize = symbolizer::scalar_type_itemsize(decoded->scalar_type);
  tensor.device = symbolizer::device_string(decoded->device_type, decoded->device_index);
  return tensor;
}

Value ArgumentDecoder::word_value(uint64_t word, const std::string& schema_type) const {
  const std::string_view type = schema_type;
  if (is_small_enum(type)) {
    // One payload byte, and for an optional its engaged flag: c10::optional keeps the flag
    // first, std::optional (torch >= 2.2) after the payload, like optional<Tensor>.
    uint8_t payload = static_cast<uint8_t>(word);
    if (type.ends_with('?')) {
      const uint8_t first = static_cast<uint8_t>(word);
      const uint8_t second = static_cast<uint8_t>(word >> 8);
      const uint8_t engaged = layout_.optional_payload_first ? second : first;
      payload = layout_.optional_payload_first ? first : second;
      if (!engaged) {
        Value none;
        none.kind = ValueKind::kNone;
        return none;
      }
    }
    if (without_optional(type) == "bool") {
      Value result;
      result.kind = ValueKind::kBool;
      result.boolean = payload != 0;
      return result;
    }
    return int_value(payload);
  }
  if (type == "int" || type == "SymInt") {
    if (type == "SymInt" && is_symbolic(word)) return Value{};
    return int_value(static_cast<int64_t>(word));
  }
  return Value{};
}

Value ArgumentDecoder::decode_one(const argument_value& raw, const op_arguments& arguments,
                                  std::string schema_type) const {
  Value value;
  switch (raw.status) {
    case ARGUMENT_WORD: value = word_value(raw.value, schema_type); break;
    case ARGUMENT_TENSOR: {
      bool defined = true;
      if (auto tensor = tensor_at(arguments, raw.first_tensor, &defined)) {
        value.kind = defined ? ValueKind::kTensor : ValueKind::kUndefinedTensor;
        value.tensor = std::move(*tensor);
      }
      break;
    }
    case ARGUMENT_ABSENT: value.kind = ValueKind::kNone; break;
    case ARGUMENT_TENSOR_LIST: {
      value.kind = ValueKind::kTensorList;
      value.list_length = raw.length;
      for (uint32_t i = 0; i < raw.tensor_count; ++i) {
        bool defined = true;
        auto tensor = tensor_at(arguments, raw.first_tensor + i, &defined);
        if (!tensor || !defined) break;
        value.tensors.push_back(std::move(*tensor));
      }
      break;
    }
    case ARGUMENT_INT_LIST: {
      value.kind = ValueKind::kIntList;
      value.list_length = raw.length;
      for (uint32_t i = 0; i < raw.int_count && raw.first_int + i < INT_LIST_VALUES_MAX; ++i) {
        const int64_t element = arguments.int_values[raw.first_int + i];
        if (is_symbolic(static_cast<uint64_t>(element))) break;
        value.ints.push_back(element);
      }
      break;
    }
    case ARGUMENT_SCALAR:
      if (raw.length == kScalarTagInt) {
        value = int_value(static_cast<int64_t>(raw.value));
      } else if (raw.length == kScalarTagDouble) {
        value.kind = ValueKind::kDouble;
        value.real = std::bit_cast<double>(raw.value);
      }
      break;
    default: break;  // unknown or unreadable
  }
  value.schema_type = std::move(schema_type);
  return value;
}

std::vector<Value> ArgumentDecoder::decode(uint32_t op_id, bool returns, const op_arguments& arguments) const {
  const uint32_t captured = std::min<uint32_t>(arguments.argument_count, OP_ARGUMENTS_MAX);
  std::vector<Value> values;
  if (op_id == kAutogradNodeInputs) {
    for (uint32_t i = 0; i < captured; ++i) values.push_back(decode_one(arguments.arguments[i], arguments, "Tensor"));
    return values;
  }
  if (op_id >= plans_.size()) return values;
  const symbolizer::OpArgumentPlan& plan = plans_[op_id];
  if (returns) {
    // BPF reads Tensor returns only; a Tensor[] return comes back as one list.
    for (uint32_t i = 0; i < captured; ++i) {
      std::string type = i < plan.return_types.size() ? plan.return_types[i] : "Tensor";
      values.push_back(decode_one(arguments.arguments[i], arguments, std::move(type)));
    }
    return values;
  }
  values.reserve(plan.inputs.size());
  for (size_t i = 0; i < plan.inputs.size(); ++i) {
    if (i < captured) {
      values.push_back(decode_one(arguments.arguments[i], arguments, plan.inputs[i].schema_type));
    } else {
      Value unknown;
      unknown.schema_type = plan.inputs[i].schema_type;
      values.push_back(std::move(unknown));
    }
  }
  return values;
}

}  // namespace tprof
