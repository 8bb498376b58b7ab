#include "userspace/ingest/argument_decoder.h"

#include <bit>
#include <optional>
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

// The decoder hands a storage's data pointer on as it is, STORAGE_DATA_NULL included: the
// model knows that address as a storage without data.
static_assert(STORAGE_DATA_NULL == 1, "model::TensorValue::storage_address's null-data storage");

// An undefined at::Tensor as an element of a list: torch's ET writes it as a tensor of no dtype,
// storage, size or device ([id, 0, 0, 0, 0, ""], "Tensor(nullptr (uninitialized))").
model::TensorValue undefined_tensor(uint64_t impl) {
  model::TensorValue tensor;
  tensor.impl_address = impl;
  tensor.dtype = "nullptr (uninitialized)";
  return tensor;
}

Value none_value() {
  Value none;
  none.kind = ValueKind::kNone;
  return none;
}

Value double_value(uint64_t word) {
  Value result;
  result.kind = ValueKind::kDouble;
  result.real = std::bit_cast<double>(word);
  return result;
}

// c10::Device: {DeviceType (int8), DeviceIndex (int8)}, spelled as Device::str() spells it.
Value device_value(uint64_t device) {
  Value result;
  result.kind = ValueKind::kDevice;
  result.text = symbolizer::device_string(static_cast<int8_t>(device & 0xff), static_cast<int8_t>(device >> 8));
  return result;
}

// std::array<bool, N>: one byte per element, the first lowest.
Value bool_list_value(uint64_t word, unsigned count) {
  Value result;
  result.kind = ValueKind::kBoolList;
  result.list_length = count;
  for (unsigned i = 0; i < count; ++i) result.ints.push_back((word >> (8 * i)) & 0xff ? 1 : 0);
  return result;
}

// N of "bool[N]", a std::array<bool, N> passed in one register; nullopt for any other type.
std::optional<unsigned> bool_array_length(std::string_view type) {
  if (!type.starts_with("bool[") || !type.ends_with(']') || type.size() != 7) return std::nullopt;
  const char digit = type[5];
  if (digit < '1' || digit > '8') return std::nullopt;
  return static_cast<unsigned>(digit - '0');
}

// Schema types passed as one-byte enums (possibly optional) in an integer register.
bool is_small_enum(std::string_view type) {
  type = without_optional(type);
  return type == "ScalarType" || type == "Layout" || type == "MemoryFormat" || type == "bool";
}

}  // namespace

ArgumentDecoder::ArgumentDecoder(symbolizer::TensorImplLayout layout, std::vector<symbolizer::OpArgumentPlan> plans,
                                 uint64_t undefined_tensor_impl)
    : layout_(std::move(layout)), plans_(std::move(plans)), undefined_tensor_impl_(undefined_tensor_impl) {}

std::optional<model::TensorValue> ArgumentDecoder::tensor_at(const op_arguments& arguments, uint32_t slot,
                                                            bool* defined) const {
  if (slot >= arguments.tensor_count || slot >= OP_TENSORS_MAX || trial_.rejected) return std::nullopt;
  // __s64 is long long, int64_t long: the same 8 bytes under two names.
  const int64_t* out_of_line =
      arguments.out_of_line_tensor == slot ? reinterpret_cast<const int64_t*>(arguments.out_of_line) : nullptr;
  return decoded_tensor(arguments.tensors[slot], out_of_line, defined);
}

std::optional<model::TensorValue> ArgumentDecoder::decoded_tensor(const tensor_copy& copy, const int64_t* out_of_line,
                                                                 bool* defined) const {
  const auto decoded = symbolizer::decode_tensor(copy, out_of_line, layout_);
  judge_layout(decoded.has_value());
  if (!decoded || trial_.rejected) return std::nullopt;
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

void ArgumentDecoder::complete_more(uint32_t op_id, const op_arguments& arguments, std::vector<Value>& inputs) const {
  if (op_id >= plans_.size()) return;
  const symbolizer::OpArgumentPlan& plan = plans_[op_id];
  const uint32_t captured = std::min<uint32_t>(arguments.argument_count, OP_ARGUMENTS_MAX);
  for (uint32_t i = 0; i < captured; ++i) {
    const size_t input = OP_ARGUMENTS_MAX + i;
    if (input >= inputs.size() || input >= plan.inputs.size()) return;
    inputs[input] = decode_one(arguments.arguments[i], arguments, plan.inputs[input].schema_type);
  }
}

Value ArgumentDecoder::tensor_list(const argument_value& raw, const op_arguments& arguments) const {
  Value list;
  list.kind = ValueKind::kTensorList;
  list.list_length = raw.length;
  uint32_t copied = 0;  // tensor copies used: Nones take none
  for (uint32_t i = 0; i < raw.length; ++i) {
    const bool none = i < 64 && ((raw.value >> i) & 1);
    if (none) {
      list.tensors.push_back(undefined_tensor(undefined_tensor_impl_));
      continue;
    }
    if (copied >= raw.tensor_count) break;
    bool defined = true;
    auto tensor = tensor_at(arguments, raw.first_tensor + copied++, &defined);
    if (!tensor) break;
    list.tensors.push_back(defined ? std::move(*tensor) : undefined_tensor(tensor->impl_address));
  }
  return list;
}

bool ArgumentDecoder::append_list_elements(const list_elements& elements, std::vector<Value>& values) const {
  if (elements.argument >= values.size()) return false;
  Value& list = values[elements.argument];
  switch (elements.kind) {
    case LIST_OF_TENSORS: return append_tensors(elements, list);
    case LIST_OF_INTS: return append_ints(elements, list);
    case LIST_OF_SCALARS: return append_doubles(elements, list);
  }
  return false;
}

bool ArgumentDecoder::append_tensors(const list_elements& elements, Value& list) const {
  if (list.kind != ValueKind::kTensorList || elements.first != list.tensors.size()) return false;
  for (uint32_t i = 0; i < elements.count && i < LIST_CHUNK_TENSORS; ++i) {
    bool defined = true;
    auto tensor = decoded_tensor(elements.tensors[i], nullptr, &defined);
    if (!tensor) return false;
    list.tensors.push_back(defined ? std::move(*tensor) : undefined_tensor(tensor->impl_address));
  }
  return true;
}

bool ArgumentDecoder::append_ints(const list_elements& elements, Value& list) {
  if (list.kind != ValueKind::kIntList || elements.first != list.ints.size()) return false;
  for (uint32_t i = 0; i < elements.count && i < LIST_CHUNK_INTS; ++i) {
    if (is_symbolic(static_cast<uint64_t>(elements.ints[i]))) return false;
    list.ints.push_back(elements.ints[i]);
  }
  return true;
}

// Scalars read as floats only: an int among them would make another list (GenericList[Int,...]).
bool ArgumentDecoder::append_doubles(const list_elements& elements, Value& list) {
  if (list.kind != ValueKind::kDoubleList || elements.first != list.reals.size()) return false;
  for (uint32_t i = 0; i < elements.count && i < LIST_CHUNK_INTS / SCALAR_WORDS; ++i) {
    const __s64* scalar = &elements.ints[SCALAR_WORDS * i];  // {tag, -, payload, -}
    if (static_cast<uint32_t>(scalar[0]) != kScalarTagDouble) return false;
    list.reals.push_back(std::bit_cast<double>(scalar[2]));
  }
  return true;
}

void ArgumentDecoder::judge_layout(bool plausible) const {
  if (trial_.tried >= kLayoutTrialTensors) return;
  ++trial_.tried;
  if (plausible) ++trial_.plausible;
  if (trial_.tried == kLayoutTrialTensors && 2 * trial_.plausible < trial_.tried) trial_.rejected = true;
}

std::optional<std::string> ArgumentDecoder::layout_rejection() const {
  if (!trial_.rejected) return std::nullopt;
  return "recording without shapes after the first tensors: only " + std::to_string(trial_.plausible) + " of the first " +
         std::to_string(trial_.tried) + " decoded into plausible tensors with the layout derived from libc10 (" +
         layout_.source + "); every later tensor is unknown";
}

// The payload bytes of an optional packed in one word (`payload_bytes` long), or nullopt for
// nullopt. c10::optional keeps the flag first, std::optional (torch >= 2.2) after the payload,
// like optional<Tensor>.
std::optional<uint64_t> ArgumentDecoder::optional_payload(uint64_t word, unsigned payload_bytes) const {
  const uint64_t payload_mask = (uint64_t{1} << (8 * payload_bytes)) - 1;
  if (layout_.optional_payload_first) {
    if (((word >> (8 * payload_bytes)) & 0xff) == 0) return std::nullopt;
    return word & payload_mask;
  }
  if ((word & 0xff) == 0) return std::nullopt;
  return (word >> 8) & payload_mask;
}

Value ArgumentDecoder::word_value(uint64_t word, const std::string& schema_type) const {
  const std::string_view type = schema_type;
  if (without_optional(type) == "Device") {
    const std::optional<uint64_t> device = type.ends_with('?') ? optional_payload(word, 2) : word & 0xffff;
    return device ? device_value(*device) : none_value();
  }
  // A double read where the op's code saved it, or an engaged float? of c10's optional, which
  // keeps the double in an integer eightbyte.
  if (type == "float" || type == "float?") return double_value(word);
  if (const auto count = bool_array_length(type)) return bool_list_value(word, *count);
  if (is_small_enum(type)) {
    // One payload byte, and for an optional its engaged flag: c10::optional keeps the flag
    // first, std::optional (torch >= 2.2) after the payload, like optional<Tensor>.
    std::optional<uint64_t> payload = word & 0xff;
    if (type.ends_with('?')) payload = optional_payload(word, 1);
    if (!payload) return none_value();
    if (without_optional(type) == "bool") {
      Value result;
      result.kind = ValueKind::kBool;
      result.boolean = *payload != 0;
      return result;
    }
    return int_value(static_cast<int64_t>(*payload));
  }
  // An engaged Generator? (BPF reports a nullopt one absent): torch shows its type alone.
  if (type == "Generator?") {
    Value result;
    result.kind = ValueKind::kObject;
    result.text = "Generator";
    return result;
  }
  // int, SymInt, and the payload of an engaged int? or SymInt? (BPF reports a nullopt one absent).
  if (type == "int" || type == "SymInt" || type == "int?" || type == "SymInt?") {
    if (type.starts_with("SymInt") && is_symbolic(word)) return Value{};
    return int_value(static_cast<int64_t>(word));
  }
  return Value{};
}

void ArgumentDecoder::complete(uint32_t op_id, const spilled_arguments& spilled, std::vector<Value>& inputs) const {
  if (op_id >= plans_.size()) return;
  const symbolizer::OpArgumentPlan& plan = plans_[op_id];
  for (size_t i = 0; i < inputs.size() && i < plan.inputs.size() && i < OP_ARGUMENTS_MAX; ++i) {
    if (!(spilled.present & (1u << i))) continue;
    inputs[i] = word_value(spilled.words[i], plan.inputs[i].schema_type);
    inputs[i].schema_type = plan.inputs[i].schema_type;
  }
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
    case ARGUMENT_TENSOR_LIST: value = tensor_list(raw, arguments); break;
    case ARGUMENT_SCALAR_LIST:  // its elements follow (append_list_elements)
      value.kind = ValueKind::kDoubleList;
      value.list_length = raw.length;
      break;
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
    case ARGUMENT_STRING:
      // Written only when whole: a cut string would be another value.
      if (raw.length <= STRING_BYTES_MAX && raw.int_count * 8u >= raw.length &&
          raw.first_int + raw.int_count <= INT_LIST_VALUES_MAX) {
        value.kind = ValueKind::kString;
        value.text.assign(reinterpret_cast<const char*>(&arguments.int_values[raw.first_int]), raw.length);
      }
      break;
    case ARGUMENT_SCALAR:
      if (raw.length == kScalarTagInt) value = int_value(static_cast<int64_t>(raw.value));
      if (raw.length == kScalarTagDouble) value = double_value(raw.value);
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
    // BPF reads Tensor and Scalar returns (and ints inside a tuple); a Tensor[] comes back as one list.
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
