// Decoding what BPF copied of an op's arguments (bpf/op_arguments.h) into model values: hand-made
// op_arguments records against torch 1.13's TensorImpl layout, read through real and hand-made
// argument plans.
#include "userspace/ingest/argument_decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "bpf/op_arguments.h"
#include "model/trace_model.h"
#include "symbolizer/aten/argument_plan.h"
#include "symbolizer/aten/tensor_impl_layout.h"
#include "tests/support/int_lists.h"
#include "tests/support/tensor_layouts.h"

namespace tprof {
namespace {

using model::Value;
using model::ValueKind;
using symbolizer::OpArgumentPlan;
using symbolizer::TensorImplLayout;

constexpr const char* kAddTensorSchema = "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";
constexpr const char* kAddTensorSymbol = "_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE";

// c10::SymInt's marker for a pointer to a symbolic node: top bits 101.
constexpr uint64_t kSymbolic = (1ULL << 63) | (1ULL << 61) | 0x1234'5670;

constexpr int kFloat = 6;
constexpr int kLong = 4;
constexpr int kCpu = 0;
constexpr int kCuda = 1;

// torch 1.13's c10::TensorImpl with std::optional's order: the payload before the flag.
TensorImplLayout payload_first_layout() {
  TensorImplLayout layout = testing::torch113_tensor_impl_layout();
  layout.optional_payload_first = true;
  return layout;
}

struct TensorFacts {
  uint64_t impl = 0;
  uint64_t storage_data = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t storage_offset = 0;
  int dtype = kFloat;
  int device_type = kCpu;
  int device_index = -1;
};

int64_t numel_of(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{1}, std::multiplies<>());
}

// Stores `value` at TensorImpl offset `offset`: window byte i is TensorImpl byte layout.dims + i.
template <typename T>
void put(tensor_copy& copy, const TensorImplLayout& layout, uint32_t offset, T value) {
  ASSERT_GE(offset, layout.dims);
  ASSERT_LE(offset - layout.dims + sizeof(T), sizeof(copy.window));
  std::memcpy(copy.window + (offset - layout.dims), &value, sizeof(T));
}

// The window of a defined tensor; sizes and strides inline when at most 5 dims (the caller
// provides the out-of-line words otherwise).
tensor_copy tensor_window(const TensorFacts& facts, const TensorImplLayout& layout = testing::torch113_tensor_impl_layout()) {
  tensor_copy copy{};
  copy.impl = facts.impl;
  copy.storage_data = facts.storage_data;
  put(copy, layout, layout.dims, static_cast<uint64_t>(facts.sizes.size()));
  if (facts.sizes.size() <= INLINE_DIMS_MAX) {
    for (size_t dim = 0; dim < facts.sizes.size(); ++dim) {
      put(copy, layout, layout.inline_sizes + static_cast<uint32_t>(8 * dim), facts.sizes[dim]);
      put(copy, layout, layout.inline_strides + static_cast<uint32_t>(8 * dim), facts.strides[dim]);
    }
  } else {
    put(copy, layout, layout.inline_sizes, uint64_t{0x7f00'dead'beef});  // the heap pointer
  }
  put(copy, layout, layout.storage_offset, facts.storage_offset);
  put(copy, layout, layout.numel, numel_of(facts.sizes));
  put(copy, layout, layout.dtype, static_cast<uint16_t>(facts.dtype));
  // torch 1.13's c10::optional<Device>: flag, type, index.
  put(copy, layout, layout.device_has_value, uint8_t{1});
  put(copy, layout, layout.device_type, static_cast<int8_t>(facts.device_type));
  put(copy, layout, layout.device_index, static_cast<int8_t>(facts.device_index));
  return copy;
}

// c10::UndefinedTensorImpl: no device, no elements, no storage.
tensor_copy undefined_window(uint64_t impl, const TensorImplLayout& layout = testing::torch113_tensor_impl_layout()) {
  tensor_copy copy{};
  copy.impl = impl;
  put(copy, layout, layout.dims, uint64_t{1});
  put(copy, layout, layout.inline_sizes, int64_t{0});
  put(copy, layout, layout.inline_strides, int64_t{1});
  put(copy, layout, layout.numel, int64_t{0});
  put(copy, layout, layout.dtype, uint16_t{18});  // ScalarType::Undefined in 1.13
  put(copy, layout, layout.device_has_value, uint8_t{0});
  return copy;
}

argument_value word(uint64_t value) {
  argument_value raw{};
  raw.status = ARGUMENT_WORD;
  raw.value = value;
  return raw;
}

argument_value tensor_slot(uint8_t slot) {
  argument_value raw{};
  raw.status = ARGUMENT_TENSOR;
  raw.first_tensor = slot;
  return raw;
}

argument_value with_status(uint8_t status) {
  argument_value raw{};
  raw.status = status;
  return raw;
}

argument_value scalar(uint32_t tag, uint64_t payload) {
  argument_value raw{};
  raw.status = ARGUMENT_SCALAR;
  raw.length = tag;
  raw.value = payload;
  return raw;
}

argument_value int_list(uint8_t first_int, uint8_t int_count, uint32_t length) {
  argument_value raw{};
  raw.status = ARGUMENT_INT_LIST;
  raw.first_int = first_int;
  raw.int_count = int_count;
  raw.length = length;
  return raw;
}

argument_value tensor_list(uint8_t first_tensor, uint8_t tensor_count, uint32_t length) {
  argument_value raw{};
  raw.status = ARGUMENT_TENSOR_LIST;
  raw.first_tensor = first_tensor;
  raw.tensor_count = tensor_count;
  raw.length = length;
  return raw;
}

op_arguments record_of(std::vector<argument_value> values, std::vector<tensor_copy> tensors = {}) {
  op_arguments arguments{};
  arguments.argument_count = static_cast<uint8_t>(values.size());
  arguments.tensor_count = static_cast<uint8_t>(tensors.size());
  arguments.out_of_line_tensor = NO_OUT_OF_LINE_TENSOR;
  for (size_t i = 0; i < values.size() && i < OP_ARGUMENTS_MAX; ++i) arguments.arguments[i] = values[i];
  for (size_t i = 0; i < tensors.size() && i < OP_TENSORS_MAX; ++i) arguments.tensors[i] = tensors[i];
  return arguments;
}

// A plan that names only what the decoder reads: the schema types of inputs and returns.
OpArgumentPlan plan_of(const std::vector<std::string>& input_types, std::vector<std::string> return_types = {"Tensor"}) {
  OpArgumentPlan plan;
  for (size_t i = 0; i < input_types.size(); ++i)
    plan.inputs.push_back({.name = "arg" + std::to_string(i), .schema_type = input_types[i], .cxx_type = "", .bpf = {}});
  plan.return_types = std::move(return_types);
  return plan;
}

// The inputs of a one-op decoder planned with `input_types`, all read as words.
std::vector<Value> decode_words(const std::vector<std::string>& input_types, const std::vector<uint64_t>& words,
                                TensorImplLayout layout = testing::torch113_tensor_impl_layout()) {
  const ArgumentDecoder decoder(std::move(layout), {plan_of(input_types)});
  std::vector<argument_value> values;
  for (uint64_t value : words) values.push_back(word(value));
  return decoder.decode(0, false, record_of(values));
}

void expect_tensor(const Value& value, const TensorFacts& facts, const std::string& dtype, uint32_t itemsize,
                   const std::string& device) {
  ASSERT_EQ(value.kind, ValueKind::kTensor);
  EXPECT_EQ(value.tensor.impl_address, facts.impl);
  EXPECT_EQ(value.tensor.storage_address, facts.storage_data);
  EXPECT_EQ(tprof::testing::as_vector(value.tensor.sizes), facts.sizes);
  EXPECT_EQ(tprof::testing::as_vector(value.tensor.strides), facts.strides);
  EXPECT_EQ(value.tensor.storage_offset, facts.storage_offset);
  EXPECT_EQ(value.tensor.numel, numel_of(facts.sizes));
  EXPECT_EQ(value.tensor.dtype, dtype);
  EXPECT_EQ(value.tensor.itemsize, itemsize);
  EXPECT_EQ(value.tensor.device, device);
}

const TensorFacts kMatrix{.impl = 0x5555'0000'1000,
                          .storage_data = 0x7f00'0000'2000,
                          .sizes = {2, 3},
                          .strides = {3, 1},
                          .storage_offset = 0,
                          .dtype = kFloat,
                          .device_type = kCpu,
                          .device_index = -1};
const TensorFacts kCudaView{.impl = 0x5555'0000'3000,
                            .storage_data = 0x7f00'0000'4000,
                            .sizes = {4, 1, 5},
                            .strides = {10, 5, 1},
                            .storage_offset = 7,
                            .dtype = kLong,
                            .device_type = kCuda,
                            .device_index = 1};

// ---- tensors, through a real plan ---------------------------------------------------------------

TEST(ArgumentDecoder, DecodesAddTensorThroughItsRealPlan) {
  OpArgumentPlan plan = symbolizer::plan_op_arguments(kAddTensorSchema, kAddTensorSymbol,
                                                      symbolizer::OptionalAbi::kC10Optional);
  ASSERT_EQ(plan.unplanned_reason, "");
  ASSERT_EQ(plan.inputs.size(), 3u);
  EXPECT_EQ(plan.inputs[0].schema_type, "Tensor");
  EXPECT_EQ(plan.inputs[1].schema_type, "Tensor");
  EXPECT_EQ(plan.inputs[2].schema_type, "Scalar");
  EXPECT_EQ(plan.return_types, std::vector<std::string>{"Tensor"});
  // What BPF is told to read, and so which statuses come back.
  ASSERT_EQ(plan.bpf.argument_count, 3);
  EXPECT_EQ(plan.bpf.arguments[0].read, READ_TENSOR);
  EXPECT_EQ(plan.bpf.arguments[1].read, READ_TENSOR);
  EXPECT_EQ(plan.bpf.arguments[2].read, READ_SCALAR);
  EXPECT_EQ(plan.bpf.output_read, OUTPUT_TENSOR);
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan});

  const std::vector<Value> inputs =
      decoder.decode(0, false,
                     record_of({tensor_slot(0), tensor_slot(1), scalar(1, 1)},
                               {tensor_window(kMatrix), tensor_window(kCudaView)}));
  ASSERT_EQ(inputs.size(), 3u);
  expect_tensor(inputs[0], kMatrix, "float", 4, "cpu");
  EXPECT_EQ(inputs[0].schema_type, "Tensor");
  expect_tensor(inputs[1], kCudaView, "long int", 8, "cuda:1");
  EXPECT_EQ(inputs[1].schema_type, "Tensor");
  EXPECT_EQ(inputs[2].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(inputs[2].ints), std::vector<int64_t>{1});
  EXPECT_EQ(inputs[2].schema_type, "Scalar");

  const TensorFacts result{.impl = 0x5555'0000'5000, .storage_data = 0x7f00'0000'6000, .sizes = {2, 3},
                           .strides = {3, 1}};
  const std::vector<Value> outputs = decoder.decode(0, true, record_of({tensor_slot(0)}, {tensor_window(result)}));
  ASSERT_EQ(outputs.size(), 1u);
  expect_tensor(outputs[0], result, "float", 4, "cpu");
  EXPECT_EQ(outputs[0].schema_type, "Tensor");
}

TEST(ArgumentDecoder, DecodesAZeroDimTensor) {
  const TensorFacts zero_dim{.impl = 0x1000, .storage_data = 0x2000, .sizes = {}, .strides = {}, .storage_offset = 3};
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor"})});
  const std::vector<Value> values = decoder.decode(0, false, record_of({tensor_slot(0)}, {tensor_window(zero_dim)}));
  ASSERT_EQ(values.size(), 1u);
  expect_tensor(values[0], zero_dim, "float", 4, "cpu");
  EXPECT_EQ(values[0].tensor.numel, 1);
}

TEST(ArgumentDecoder, KeepsTheImplOfAnUndefinedTensor) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor?", "Tensor"})});
  tensor_copy undefined = undefined_window(0x7f00'1111'0000);
  undefined.storage_data = 0;
  const std::vector<Value> values =
      decoder.decode(0, false, record_of({tensor_slot(0), tensor_slot(1)}, {undefined, tensor_window(kMatrix)}));
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].kind, ValueKind::kUndefinedTensor);
  EXPECT_EQ(values[0].tensor.impl_address, 0x7f00'1111'0000u);
  EXPECT_EQ(values[0].tensor.storage_address, 0u);
  EXPECT_TRUE(values[0].tensor.sizes.empty());
  EXPECT_EQ(values[0].tensor.dtype, "");
  EXPECT_EQ(values[0].schema_type, "Tensor?");
  expect_tensor(values[1], kMatrix, "float", 4, "cpu");
}

TEST(ArgumentDecoder, AnAbsentOptionalTensorIsNone) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor", "Tensor?"})});
  const std::vector<Value> values =
      decoder.decode(0, false, record_of({tensor_slot(0), with_status(ARGUMENT_ABSENT)}, {tensor_window(kMatrix)}));
  ASSERT_EQ(values.size(), 2u);
  expect_tensor(values[0], kMatrix, "float", 4, "cpu");
  EXPECT_EQ(values[1].kind, ValueKind::kNone);
  EXPECT_EQ(values[1].schema_type, "Tensor?");
}

TEST(ArgumentDecoder, TensorsThatDoNotDecodeAreUnknown) {
  tensor_copy unreadable = tensor_window(kMatrix);
  unreadable.impl = 0;  // BPF could not read the at::Tensor
  tensor_copy garbage = tensor_window(kMatrix);
  put(garbage, testing::torch113_tensor_impl_layout(), testing::torch113_tensor_impl_layout().numel, int64_t{5});  // not 2 * 3
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor", "Tensor", "Tensor", "Tensor", "Tensor"})});
  const std::vector<Value> values = decoder.decode(
      0, false,
      record_of({tensor_slot(0), tensor_slot(1), tensor_slot(2) /* past tensor_count */,
                 with_status(ARGUMENT_UNREADABLE), with_status(ARGUMENT_UNKNOWN)},
                {unreadable, garbage}));
  ASSERT_EQ(values.size(), 5u);
  for (size_t i = 0; i < values.size(); ++i) {
    SCOPED_TRACE("argument " + std::to_string(i));
    EXPECT_EQ(values[i].kind, ValueKind::kUnknown);
    EXPECT_EQ(values[i].schema_type, "Tensor");
  }
}

TEST(ArgumentDecoder, ReadsTheOutOfLineDimsOfItsOwnTensorOnly) {
  const TensorFacts six_dims{.impl = 0x9000,
                             .storage_data = 0xa000,
                             .sizes = {2, 1, 3, 1, 2, 2},
                             .strides = {12, 12, 4, 4, 2, 1},
                             .storage_offset = 4,
                             .dtype = kFloat,
                             .device_type = kCuda,
                             .device_index = 0};
  op_arguments arguments =
      record_of({tensor_slot(0), tensor_slot(1)}, {tensor_window(kMatrix), tensor_window(six_dims)});
  arguments.out_of_line_tensor = 1;
  std::vector<int64_t> words = six_dims.sizes;
  words.insert(words.end(), six_dims.strides.begin(), six_dims.strides.end());
  std::memcpy(arguments.out_of_line, words.data(), words.size() * sizeof(int64_t));

  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor", "Tensor"})});
  std::vector<Value> values = decoder.decode(0, false, arguments);
  ASSERT_EQ(values.size(), 2u);
  expect_tensor(values[0], kMatrix, "float", 4, "cpu");
  expect_tensor(values[1], six_dims, "float", 4, "cuda:0");

  // The out-of-line words belong to another tensor: six dims without them do not decode.
  arguments.out_of_line_tensor = 0;
  values = decoder.decode(0, false, arguments);
  ASSERT_EQ(values.size(), 2u);
  expect_tensor(values[0], kMatrix, "float", 4, "cpu");
  EXPECT_EQ(values[1].kind, ValueKind::kUnknown);
  EXPECT_EQ(values[1].schema_type, "Tensor");
}

// ---- words ---------------------------------------------------------------------------------------

TEST(ArgumentDecoder, IntWordsAreSignedInt64) {
  const std::vector<Value> values =
      decode_words({"int", "int", "SymInt", "SymInt", "SymInt"},
                   {static_cast<uint64_t>(int64_t{-5}), 1ULL << 40, 7, static_cast<uint64_t>(int64_t{-3}), kSymbolic});
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[0].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), std::vector<int64_t>{-5});
  EXPECT_EQ(values[0].schema_type, "int");
  EXPECT_EQ(tprof::testing::as_vector(values[1].ints), std::vector<int64_t>{int64_t{1} << 40});
  EXPECT_EQ(values[2].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[2].ints), std::vector<int64_t>{7});
  EXPECT_EQ(values[2].schema_type, "SymInt");
  // A negative plain SymInt has top bits 111, not the symbolic marker 101.
  EXPECT_EQ(values[3].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[3].ints), std::vector<int64_t>{-3});
  // A symbolic SymInt is a pointer, not a value.
  EXPECT_EQ(values[4].kind, ValueKind::kUnknown);
  EXPECT_TRUE(values[4].ints.empty());
  EXPECT_EQ(values[4].schema_type, "SymInt");
}

TEST(ArgumentDecoder, AnIntWordIsNeverTakenForASymbolicSymInt) {
  const std::vector<Value> values = decode_words({"int"}, {kSymbolic});
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), std::vector<int64_t>{static_cast<int64_t>(kSymbolic)});
}

TEST(ArgumentDecoder, BoolAndEnumWordsReadTheirLowByte) {
  // Only the low byte of the register is the argument; the rest is whatever was there.
  const std::vector<Value> values = decode_words({"bool", "bool", "bool", "ScalarType", "Layout", "MemoryFormat"},
                                                 {1, 0xabcd'ef00, 0x1234'5601, 0xff06, 0x12, 0x3302});
  ASSERT_EQ(values.size(), 6u);
  EXPECT_EQ(values[0].kind, ValueKind::kBool);
  EXPECT_TRUE(values[0].boolean);
  EXPECT_EQ(values[0].schema_type, "bool");
  EXPECT_EQ(values[1].kind, ValueKind::kBool);
  EXPECT_FALSE(values[1].boolean);
  EXPECT_EQ(values[2].kind, ValueKind::kBool);
  EXPECT_TRUE(values[2].boolean);
  EXPECT_EQ(values[3].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[3].ints), std::vector<int64_t>{6});
  EXPECT_EQ(values[3].schema_type, "ScalarType");
  EXPECT_EQ(values[4].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[4].ints), std::vector<int64_t>{0x12});
  EXPECT_EQ(values[5].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[5].ints), std::vector<int64_t>{2});
}

TEST(ArgumentDecoder, OptionalEnumsWithTheFlagFirst) {
  // c10::optional<ScalarType> (torch < 2.2): byte 0 the engaged flag, byte 1 the payload.
  const std::vector<Value> values = decode_words({"ScalarType?", "ScalarType?", "ScalarType?", "bool?", "bool?", "bool?"},
                                                 {0x0601, 0x0600, 0x0000, 0x0101, 0x0001, 0x0100});
  ASSERT_EQ(values.size(), 6u);
  EXPECT_EQ(values[0].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), std::vector<int64_t>{6});
  EXPECT_EQ(values[0].schema_type, "ScalarType?");
  EXPECT_EQ(values[1].kind, ValueKind::kNone);
  EXPECT_EQ(values[1].schema_type, "ScalarType?");
  EXPECT_EQ(values[2].kind, ValueKind::kNone);
  EXPECT_EQ(values[3].kind, ValueKind::kBool);
  EXPECT_TRUE(values[3].boolean);
  EXPECT_EQ(values[4].kind, ValueKind::kBool);
  EXPECT_FALSE(values[4].boolean);
  EXPECT_EQ(values[5].kind, ValueKind::kNone);
}

TEST(ArgumentDecoder, OptionalEnumsWithThePayloadFirst) {
  // std::optional<ScalarType> (torch >= 2.2): byte 0 the payload, byte 1 the engaged flag.
  const std::vector<Value> values =
      decode_words({"ScalarType?", "ScalarType?", "ScalarType?", "bool?", "bool?", "MemoryFormat?"},
                   {0x0106, 0x0006, 0x0100, 0x0101, 0x0001, 0x0102}, payload_first_layout());
  ASSERT_EQ(values.size(), 6u);
  EXPECT_EQ(values[0].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), std::vector<int64_t>{6});
  EXPECT_EQ(values[1].kind, ValueKind::kNone);
  EXPECT_EQ(values[1].schema_type, "ScalarType?");
  EXPECT_EQ(values[2].kind, ValueKind::kInt);  // engaged, ScalarType::Byte
  EXPECT_EQ(tprof::testing::as_vector(values[2].ints), std::vector<int64_t>{0});
  EXPECT_EQ(values[3].kind, ValueKind::kBool);
  EXPECT_TRUE(values[3].boolean);
  EXPECT_EQ(values[4].kind, ValueKind::kNone);
  EXPECT_EQ(values[5].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[5].ints), std::vector<int64_t>{2});
}

TEST(ArgumentDecoder, WordsOfOtherSchemaTypesAreUnknown) {
  // A str comes as ARGUMENT_STRING, and the others are not read: a word of any says nothing.
  const std::vector<Value> values = decode_words({"str", "Storage", "Dimname"}, {0x1234, 0x0101, 0x0101});
  ASSERT_EQ(values.size(), 3u);
  const std::vector<std::string> types = {"str", "Storage", "Dimname"};
  for (size_t i = 0; i < values.size(); ++i) {
    SCOPED_TRACE(types[i]);
    EXPECT_EQ(values[i].kind, ValueKind::kUnknown);
    EXPECT_EQ(values[i].schema_type, types[i]);
  }
}

TEST(ArgumentDecoder, DevicesAreSpelledAsDeviceStrDoes) {
  // c10::Device {DeviceType, DeviceIndex}: CPU 0 and CUDA 1, index -1 for none; the bytes
  // above the two are not defined.
  const std::vector<Value> values = decode_words({"Device", "Device", "Device?", "Device?", "Device?"},
                                                 {0xabcd'ff00, 0x0301, 0x00'ff'00'01, 0x00'00'00'00, 0x01'01'01});
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[0].kind, ValueKind::kDevice);
  EXPECT_EQ(values[0].text, "cpu");
  EXPECT_EQ(values[1].text, "cuda:3");
  EXPECT_EQ(values[2].kind, ValueKind::kDevice);  // c10::optional: flag first
  EXPECT_EQ(values[2].text, "cpu");
  EXPECT_EQ(values[3].kind, ValueKind::kNone);
  EXPECT_EQ(values[4].text, "cuda:1");
  EXPECT_EQ(values[4].schema_type, "Device?");
}

TEST(ArgumentDecoder, OptionalDevicesWithThePayloadFirst) {
  // std::optional<Device>: type, index, then the engaged flag.
  const std::vector<Value> values = decode_words({"Device?", "Device?"}, {0x01'ff'00, 0x00'ff'00}, payload_first_layout());
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].kind, ValueKind::kDevice);
  EXPECT_EQ(values[0].text, "cpu");
  EXPECT_EQ(values[1].kind, ValueKind::kNone);
}

TEST(ArgumentDecoder, BoolArraysGiveOneBoolPerByte) {
  const std::vector<Value> values = decode_words({"bool[3]", "bool[2]"}, {0xee'01'01'00, 0x0101});
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].kind, ValueKind::kBoolList);
  EXPECT_EQ(values[0].list_length, 3u);
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), (std::vector<int64_t>{0, 1, 1}));
  EXPECT_EQ(tprof::testing::as_vector(values[1].ints), (std::vector<int64_t>{1, 1}));
}

TEST(ArgumentDecoder, FloatWordsAreTheDoublesBits) {
  const std::vector<Value> values = decode_words({"float", "float"}, {std::bit_cast<uint64_t>(0.1), std::bit_cast<uint64_t>(-1e-5)});
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].kind, ValueKind::kDouble);
  EXPECT_EQ(values[0].real, 0.1);
  EXPECT_EQ(values[1].real, -1e-5);
}

TEST(ArgumentDecoder, EngagedOptionalsAreTheirPayload) {
  // BPF reports a nullopt one absent, an engaged one as its payload word; a Generator is shown
  // by its type's name, as torch's ET does.
  const std::vector<Value> values =
      decode_words({"SymInt?", "int?", "float?", "Generator?"}, {7, static_cast<uint64_t>(-2), std::bit_cast<uint64_t>(0.5), 0x5555});
  ASSERT_EQ(values.size(), 4u);
  EXPECT_EQ(values[0].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), std::vector<int64_t>{7});
  EXPECT_EQ(tprof::testing::as_vector(values[1].ints), std::vector<int64_t>{-2});
  EXPECT_EQ(values[2].kind, ValueKind::kDouble);
  EXPECT_EQ(values[2].real, 0.5);
  EXPECT_EQ(values[3].kind, ValueKind::kObject);
  EXPECT_EQ(values[3].text, "Generator");
}

// A string's bytes sit in int_values like an int list's elements.
argument_value string_at(uint8_t first_int, uint32_t length, uint8_t words) {
  argument_value raw = int_list(first_int, words, length);
  raw.status = ARGUMENT_STRING;
  return raw;
}

TEST(ArgumentDecoder, StringsAreWrittenOnlyWhole) {
  op_arguments arguments = record_of({string_at(2, 4, 4), string_at(6, 40, 4), string_at(0, 4, 0)});
  std::memcpy(&arguments.int_values[2], "none", 4);
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"str", "str", "str"})});
  const std::vector<Value> values = decoder.decode(0, false, arguments);
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0].kind, ValueKind::kString);
  EXPECT_EQ(values[0].text, "none");
  EXPECT_EQ(values[1].kind, ValueKind::kUnknown);  // 40 bytes: only 32 were copied
  EXPECT_EQ(values[2].kind, ValueKind::kUnknown);  // the copy failed
}

TEST(ArgumentDecoder, SpilledDoublesCompleteTheInputsTheyArePresentFor) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor", "float", "float"})});
  std::vector<Value> inputs = decoder.decode(0, false, record_of({with_status(ARGUMENT_UNKNOWN), with_status(ARGUMENT_UNKNOWN),
                                                                   with_status(ARGUMENT_UNKNOWN)}));
  ASSERT_EQ(inputs.size(), 3u);
  spilled_arguments spilled{};
  spilled.present = 1u << 1;  // the first double; the second was not readable
  spilled.words[1] = std::bit_cast<uint64_t>(0.1);
  spilled.words[2] = std::bit_cast<uint64_t>(2.0);
  decoder.complete(0, spilled, inputs);
  EXPECT_EQ(inputs[0].kind, ValueKind::kUnknown);
  EXPECT_EQ(inputs[1].kind, ValueKind::kDouble);
  EXPECT_EQ(inputs[1].real, 0.1);
  EXPECT_EQ(inputs[1].schema_type, "float");
  EXPECT_EQ(inputs[2].kind, ValueKind::kUnknown);
}

// ---- lists and scalars ---------------------------------------------------------------------------

TEST(ArgumentDecoder, IntListsKeepTheirCopiedPrefixAndFullLength) {
  op_arguments arguments = record_of({int_list(0, 3, 3), int_list(3, 2, 9), int_list(5, 3, 3), int_list(14, 5, 5),
                                      int_list(0, 0, 0)});
  const int64_t ints[INT_LIST_VALUES_MAX] = {2, 3, 4, /**/ 1, -1, /**/ 8, static_cast<int64_t>(kSymbolic), 9,
                                             0, 0, 0, 0, 0, 0, /**/ 10, 11};
  std::memcpy(arguments.int_values, ints, sizeof ints);
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(),
                                {plan_of({"int[]", "SymInt[]", "SymInt[]", "int[2]", "int[]"})});
  const std::vector<Value> values = decoder.decode(0, false, arguments);
  ASSERT_EQ(values.size(), 5u);
  for (const Value& value : values) EXPECT_EQ(value.kind, ValueKind::kIntList);
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(values[0].list_length, 3u);
  EXPECT_EQ(values[0].schema_type, "int[]");
  // Partially copied: the first two of nine.
  EXPECT_EQ(tprof::testing::as_vector(values[1].ints), (std::vector<int64_t>{1, -1}));
  EXPECT_EQ(values[1].list_length, 9u);
  EXPECT_EQ(values[1].schema_type, "SymInt[]");
  // A symbolic element ends what is known.
  EXPECT_EQ(tprof::testing::as_vector(values[2].ints), std::vector<int64_t>{8});
  EXPECT_EQ(values[2].list_length, 3u);
  // Never past the end of int_values.
  EXPECT_EQ(tprof::testing::as_vector(values[3].ints), (std::vector<int64_t>{10, 11}));
  EXPECT_EQ(values[3].list_length, 5u);
  EXPECT_EQ(values[3].schema_type, "int[2]");
  EXPECT_TRUE(values[4].ints.empty());
  EXPECT_EQ(values[4].list_length, 0u);
}

TEST(ArgumentDecoder, ScalarsWithTheDoubleAndIntTagsOnly) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Scalar", "Scalar", "Scalar", "Scalar", "Scalar?"})});
  const std::vector<Value> values = decoder.decode(
      0, false,
      record_of({scalar(0, std::bit_cast<uint64_t>(2.5)), scalar(1, static_cast<uint64_t>(int64_t{-7})),
                 scalar(2, 1) /* complex in 1.13, unsigned in 2.x */, scalar(3, 1), scalar(0, std::bit_cast<uint64_t>(-0.25))}));
  ASSERT_EQ(values.size(), 5u);
  EXPECT_EQ(values[0].kind, ValueKind::kDouble);
  EXPECT_EQ(values[0].real, 2.5);
  EXPECT_EQ(values[0].schema_type, "Scalar");
  EXPECT_EQ(values[1].kind, ValueKind::kInt);
  EXPECT_EQ(tprof::testing::as_vector(values[1].ints), std::vector<int64_t>{-7});
  EXPECT_EQ(values[2].kind, ValueKind::kUnknown);
  EXPECT_EQ(values[2].schema_type, "Scalar");
  EXPECT_EQ(values[3].kind, ValueKind::kUnknown);
  EXPECT_EQ(values[4].kind, ValueKind::kDouble);
  EXPECT_EQ(values[4].real, -0.25);
  EXPECT_EQ(values[4].schema_type, "Scalar?");
}

TEST(ArgumentDecoder, ScalarDoublesKeepInfinityAndNan) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Scalar", "Scalar"})});
  const std::vector<Value> values =
      decoder.decode(0, false,
                     record_of({scalar(0, std::bit_cast<uint64_t>(-std::numeric_limits<double>::infinity())), scalar(0, std::bit_cast<uint64_t>(std::numeric_limits<double>::quiet_NaN()))}));
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].kind, ValueKind::kDouble);
  EXPECT_TRUE(std::isinf(values[0].real) && values[0].real < 0);
  EXPECT_EQ(values[1].kind, ValueKind::kDouble);
  EXPECT_TRUE(std::isnan(values[1].real));
}

TEST(ArgumentDecoder, TensorListsStopAtTheFirstTensorThatCannotBeRead) {
  const TensorFacts third{.impl = 0xc000, .storage_data = 0x7f00'0000'2000, .sizes = {6}, .strides = {1},
                          .storage_offset = 6};
  tensor_copy unreadable = tensor_window(third);
  unreadable.impl = 0;
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor", "Tensor[]", "Tensor[]", "Tensor[]", "Tensor[]"})});
  const std::vector<Value> values = decoder.decode(
      0, false,
      record_of({tensor_slot(0), tensor_list(1, 3, 5), tensor_list(4, 2, 2), tensor_list(6, 2, 2), tensor_list(0, 0, 0)},
                {tensor_window(kMatrix),  // 0
                 tensor_window(kCudaView), tensor_window(kMatrix), tensor_window(third),  // 1..3
                 tensor_window(third), undefined_window(0xdead),                          // 4..5
                 unreadable, tensor_window(kMatrix)}));                                   // 6..7
  ASSERT_EQ(values.size(), 5u);
  expect_tensor(values[0], kMatrix, "float", 4, "cpu");

  EXPECT_EQ(values[1].kind, ValueKind::kTensorList);
  EXPECT_EQ(values[1].list_length, 5u);
  EXPECT_EQ(values[1].schema_type, "Tensor[]");
  ASSERT_EQ(values[1].tensors.size(), 3u);
  EXPECT_EQ(values[1].tensors[0].impl_address, kCudaView.impl);
  EXPECT_EQ(tprof::testing::as_vector(values[1].tensors[0].sizes), kCudaView.sizes);
  EXPECT_EQ(values[1].tensors[0].device, "cuda:1");
  EXPECT_EQ(values[1].tensors[1].impl_address, kMatrix.impl);
  EXPECT_EQ(values[1].tensors[2].impl_address, third.impl);
  EXPECT_EQ(values[1].tensors[2].storage_offset, 6);
  EXPECT_EQ(values[1].tensors[2].dtype, "float");

  // An undefined element is one, as torch's ET writes it: a tensor of no dtype.
  EXPECT_EQ(values[2].kind, ValueKind::kTensorList);
  EXPECT_EQ(values[2].list_length, 2u);
  ASSERT_EQ(values[2].tensors.size(), 2u);
  EXPECT_EQ(values[2].tensors[0].impl_address, third.impl);
  EXPECT_EQ(values[2].tensors[1].impl_address, 0xdeadu);
  EXPECT_EQ(values[2].tensors[1].dtype, "nullptr (uninitialized)");

  // An unreadable one ends the known prefix.
  EXPECT_EQ(values[3].kind, ValueKind::kTensorList);
  EXPECT_EQ(values[3].list_length, 2u);
  EXPECT_TRUE(values[3].tensors.empty());

  EXPECT_EQ(values[4].kind, ValueKind::kTensorList);
  EXPECT_EQ(values[4].list_length, 0u);
  EXPECT_TRUE(values[4].tensors.empty());
}

// ---- what the plan says -------------------------------------------------------------------------

TEST(ArgumentDecoder, ArgumentsPastTheCapturedCountAreUnknownWithTheirSchemaType) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor", "int", "Scalar", "bool?"})});
  const std::vector<Value> values = decoder.decode(0, false, record_of({tensor_slot(0), word(3)}, {tensor_window(kMatrix)}));
  ASSERT_EQ(values.size(), 4u);
  expect_tensor(values[0], kMatrix, "float", 4, "cpu");
  EXPECT_EQ(values[1].kind, ValueKind::kInt);
  EXPECT_EQ(values[2].kind, ValueKind::kUnknown);
  EXPECT_EQ(values[2].schema_type, "Scalar");
  EXPECT_EQ(values[3].kind, ValueKind::kUnknown);
  EXPECT_EQ(values[3].schema_type, "bool?");
}

TEST(ArgumentDecoder, OnlyTheFirstSixteenArgumentsAreEverCaptured) {
  std::vector<std::string> types(OP_ARGUMENTS_MAX + 3, "int");
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of(types)});
  std::vector<argument_value> words;
  for (uint64_t i = 0; i < OP_ARGUMENTS_MAX; ++i) words.push_back(word(100 + i));
  op_arguments arguments = record_of(words);
  arguments.argument_count = OP_ARGUMENTS_MAX + 3;  // more than the record can hold
  const std::vector<Value> values = decoder.decode(0, false, arguments);
  ASSERT_EQ(values.size(), types.size());
  for (size_t i = 0; i < OP_ARGUMENTS_MAX; ++i) {
    EXPECT_EQ(values[i].kind, ValueKind::kInt) << i;
    EXPECT_EQ(tprof::testing::as_vector(values[i].ints), std::vector<int64_t>{static_cast<int64_t>(100 + i)}) << i;
  }
  for (size_t i = OP_ARGUMENTS_MAX; i < types.size(); ++i) {
    EXPECT_EQ(values[i].kind, ValueKind::kUnknown) << i;
    EXPECT_EQ(values[i].schema_type, "int") << i;
  }
}

TEST(ArgumentDecoder, ReturnsTakeTheirTypesFromThePlanAndDefaultToTensor) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(),
                                {plan_of({"Tensor"}, {"Tensor", "Tensor[]"}), plan_of({"Tensor"}, {})});
  const std::vector<Value> returns = decoder.decode(
      0, true,
      record_of({tensor_slot(0), tensor_list(1, 1, 1), tensor_slot(2)},
                {tensor_window(kMatrix), tensor_window(kCudaView), tensor_window(kMatrix)}));
  ASSERT_EQ(returns.size(), 3u);
  expect_tensor(returns[0], kMatrix, "float", 4, "cpu");
  EXPECT_EQ(returns[0].schema_type, "Tensor");
  EXPECT_EQ(returns[1].kind, ValueKind::kTensorList);
  EXPECT_EQ(returns[1].schema_type, "Tensor[]");
  ASSERT_EQ(returns[1].tensors.size(), 1u);
  EXPECT_EQ(returns[1].tensors[0].impl_address, kCudaView.impl);
  expect_tensor(returns[2], kMatrix, "float", 4, "cpu");
  EXPECT_EQ(returns[2].schema_type, "Tensor");  // beyond return_types

  // An op planned with no returns still reports what BPF read, as Tensor.
  const std::vector<Value> void_returns = decoder.decode(1, true, record_of({tensor_slot(0)}, {tensor_window(kMatrix)}));
  ASSERT_EQ(void_returns.size(), 1u);
  EXPECT_EQ(void_returns[0].schema_type, "Tensor");

  // Nothing read, nothing returned.
  EXPECT_TRUE(decoder.decode(0, true, record_of({})).empty());
}

TEST(ArgumentDecoder, AutogradNodeInputsAreAllTensors) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {});
  const std::vector<Value> values = decoder.decode(
      ArgumentDecoder::kAutogradNodeInputs, false,
      record_of({tensor_slot(1), tensor_slot(0), with_status(ARGUMENT_UNKNOWN)},
                {tensor_window(kMatrix), undefined_window(0xabc0)}));
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[0].kind, ValueKind::kUndefinedTensor);
  EXPECT_EQ(values[0].tensor.impl_address, 0xabc0u);
  EXPECT_EQ(values[0].schema_type, "Tensor");
  expect_tensor(values[1], kMatrix, "float", 4, "cpu");
  EXPECT_EQ(values[1].schema_type, "Tensor");
  EXPECT_EQ(values[2].kind, ValueKind::kUnknown);
  EXPECT_EQ(values[2].schema_type, "Tensor");
}

TEST(ArgumentDecoder, AnOpWithoutAPlanDecodesToNothing) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor"})});
  const op_arguments arguments = record_of({tensor_slot(0)}, {tensor_window(kMatrix)});
  EXPECT_TRUE(decoder.decode(1, false, arguments).empty());
  EXPECT_TRUE(decoder.decode(1, true, arguments).empty());
}

TEST(ArgumentDecoder, AnEmptyPlanDecodesToNoInputs) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({})});
  EXPECT_TRUE(decoder.decode(0, false, record_of({word(1)})).empty());
}

// ---- lists longer than their op's record, Tensor?[], Scalar? --------------------------------

// OP_RECORD_LIST_ELEMENTS' payload for argument `argument`, from element `first`.
list_elements int_elements(uint8_t argument, uint32_t first, const std::vector<int64_t>& ints) {
  list_elements elements{};
  elements.argument = argument;
  elements.kind = LIST_OF_INTS;
  elements.first = first;
  elements.count = static_cast<uint8_t>(ints.size());
  std::copy(ints.begin(), ints.end(), elements.ints);
  return elements;
}

list_elements tensor_elements(uint8_t argument, uint32_t first, const std::vector<tensor_copy>& tensors) {
  list_elements elements{};
  elements.argument = argument;
  elements.kind = LIST_OF_TENSORS;
  elements.first = first;
  elements.count = static_cast<uint8_t>(tensors.size());
  std::copy(tensors.begin(), tensors.end(), elements.tensors);
  return elements;
}

TEST(ArgumentDecoder, AnIntListContinuesInListElementRecords) {
  // zeros([2, 1, 2, 1, 2, 1, 2, 1, 2]): 8 elements fit the op's record, the 9th follows.
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"int[]"})});
  op_arguments arguments = record_of({int_list(0, 8, 9)});
  const int64_t first_eight[8] = {2, 1, 2, 1, 2, 1, 2, 1};
  std::memcpy(arguments.int_values, first_eight, sizeof(first_eight));
  std::vector<Value> values = decoder.decode(0, false, arguments);
  ASSERT_EQ(values.size(), 1u);
  EXPECT_EQ(values[0].ints.size(), 8u);  // partial until the rest arrives
  EXPECT_FALSE(decoder.append_list_elements(int_elements(0, 9, {2}), values)) << "a gap before them";
  EXPECT_FALSE(decoder.append_list_elements(int_elements(1, 8, {2}), values)) << "no argument 1";
  ASSERT_TRUE(decoder.append_list_elements(int_elements(0, 8, {2}), values));
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), (std::vector<int64_t>{2, 1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(values[0].list_length, 9u);
}

TEST(ArgumentDecoder, ALongIntListIsKeptWhole) {
  // More than IntValues keeps inline: 100 elements over two records.
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"int[]"})});
  std::vector<Value> values = decoder.decode(0, false, record_of({int_list(0, 0, 100)}));
  std::vector<int64_t> elements(100);
  std::iota(elements.begin(), elements.end(), 0);
  ASSERT_TRUE(decoder.append_list_elements(
      int_elements(0, 0, std::vector<int64_t>(elements.begin(), elements.begin() + LIST_CHUNK_INTS)), values));
  ASSERT_TRUE(decoder.append_list_elements(
      int_elements(0, LIST_CHUNK_INTS, std::vector<int64_t>(elements.begin() + LIST_CHUNK_INTS, elements.end())), values));
  EXPECT_EQ(tprof::testing::as_vector(values[0].ints), elements);
}

TEST(ArgumentDecoder, ATensorListContinuesInListElementRecords) {
  // A foreach op's parameters: 4 tensors in the op's record, 2 more after it.
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor[]", "Scalar"})});
  std::vector<tensor_copy> windows;
  std::vector<TensorFacts> facts;
  for (uint64_t i = 0; i < 6; ++i) {
    facts.push_back({.impl = 0x5555'0000'1000 + 0x100 * i, .storage_data = 0x7f00'0000'1000 + 0x100 * i,
                     .sizes = {static_cast<int64_t>(i + 1)}, .strides = {1}});
    windows.push_back(tensor_window(facts.back()));
  }
  std::vector<Value> values = decoder.decode(
      0, false, record_of({tensor_list(0, 4, 6), scalar(1, 3)}, std::vector<tensor_copy>(windows.begin(), windows.begin() + 4)));
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0].tensors.size(), 4u);
  EXPECT_FALSE(decoder.append_list_elements(tensor_elements(1, 4, {windows[4]}), values)) << "not a tensor list";
  ASSERT_TRUE(decoder.append_list_elements(tensor_elements(0, 4, {windows[4], windows[5]}), values));
  ASSERT_EQ(values[0].tensors.size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    Value element;
    element.kind = ValueKind::kTensor;
    element.tensor = values[0].tensors[i];
    expect_tensor(element, facts[i], "float", 4, "cpu");
  }
  EXPECT_EQ(values[1].kind, ValueKind::kInt);
}

TEST(ArgumentDecoder, ATensorListElementThatDoesNotDecodeLeavesTheListPartial) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor[]"})});
  std::vector<Value> values = decoder.decode(0, false, record_of({tensor_list(0, 1, 3)}, {tensor_window(kMatrix)}));
  tensor_copy garbage{};
  garbage.impl = 0x1234;
  std::memset(garbage.window, 0xff, sizeof(garbage.window));
  EXPECT_FALSE(decoder.append_list_elements(tensor_elements(0, 1, {garbage, tensor_window(kMatrix)}), values));
  EXPECT_EQ(values[0].tensors.size(), 1u);
  EXPECT_EQ(values[0].list_length, 3u);
}

TEST(ArgumentDecoder, OptionalTensorListNonesAreUndefinedTensors) {
  // x[:, idx]: index's Tensor?[] {None, idx}. BPF marks element 0 None and copies idx alone;
  // torch's ET names the None by the UndefinedTensorImpl singleton.
  constexpr uint64_t kUndefinedSingleton = 0x7fff'0000'9e60;
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor", "Tensor?[]"})},
                                kUndefinedSingleton);
  argument_value indices = tensor_list(1, 1, 2);
  indices.value = 0b01;
  const std::vector<Value> values =
      decoder.decode(0, false, record_of({tensor_slot(0), indices}, {tensor_window(kMatrix), tensor_window(kCudaView)}));
  ASSERT_EQ(values.size(), 2u);
  ASSERT_EQ(values[1].kind, ValueKind::kTensorList);
  ASSERT_EQ(values[1].tensors.size(), 2u);
  EXPECT_EQ(values[1].tensors[0].impl_address, kUndefinedSingleton);
  EXPECT_EQ(values[1].tensors[0].dtype, "nullptr (uninitialized)");
  EXPECT_EQ(values[1].tensors[0].numel, 0);
  EXPECT_TRUE(values[1].tensors[0].device.empty());
  EXPECT_EQ(values[1].tensors[1].impl_address, kCudaView.impl);
  EXPECT_EQ(values[1].schema_type, "Tensor?[]");
}

TEST(ArgumentDecoder, AnUndefinedTensorInsideAListIsAnElement) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor[]"})});
  const std::vector<Value> values =
      decoder.decode(0, false, record_of({tensor_list(0, 2, 2)}, {tensor_window(kMatrix), undefined_window(0xabc0)}));
  ASSERT_EQ(values[0].tensors.size(), 2u);
  EXPECT_EQ(values[0].tensors[1].impl_address, 0xabc0u);
  EXPECT_EQ(values[0].tensors[1].dtype, "nullptr (uninitialized)");
}

TEST(ArgumentDecoder, OptionalScalarsAreNoneOrTheirScalar) {
  // clamp(x, min=None, max=7): BPF reads optional<Scalar>'s flag, then the Scalar.
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor", "Scalar?", "Scalar?"})});
  const std::vector<Value> values = decoder.decode(
      0, false, record_of({tensor_slot(0), with_status(ARGUMENT_ABSENT), scalar(1, 7)}, {tensor_window(kMatrix)}));
  ASSERT_EQ(values.size(), 3u);
  EXPECT_EQ(values[1].kind, ValueKind::kNone);
  EXPECT_EQ(values[1].schema_type, "Scalar?");
  ASSERT_EQ(values[2].kind, ValueKind::kInt);
  EXPECT_EQ(values[2].ints.at(0), 7);
}

TEST(ArgumentDecoder, AStdOptionalDoubleFromTheStackIsItsValue) {
  // scaled_dot_product_attention's scale: READ_OPTIONAL_WORD_PAIR gives the double's bits, or
  // absent.
  const ArgumentDecoder decoder(payload_first_layout(), {plan_of({"float?", "float?"})});
  const std::vector<Value> values =
      decoder.decode(0, false, record_of({word(std::bit_cast<uint64_t>(0.125)), with_status(ARGUMENT_ABSENT)}));
  ASSERT_EQ(values[0].kind, ValueKind::kDouble);
  EXPECT_EQ(values[0].real, 0.125);
  EXPECT_EQ(values[1].kind, ValueKind::kNone);
}

TEST(ArgumentDecoder, ArgumentsPastTheSixteenthComeInTheirOwnRecord) {
  // mkldnn_rnn_layer_backward has 23 arguments: the entry record holds 16, its
  // OP_RECORD_MORE_ARGUMENTS record the rest, in the same order.
  std::vector<std::string> types(OP_ARGUMENTS_MAX + 3, "int");
  types.back() = "bool";
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of(types)});
  std::vector<argument_value> first;
  for (uint64_t i = 0; i < OP_ARGUMENTS_MAX; ++i) first.push_back(word(i));
  op_arguments entry = record_of(first);
  entry.argument_count = OP_ARGUMENTS_MAX;
  std::vector<Value> inputs = decoder.decode(0, false, entry);
  ASSERT_EQ(inputs.size(), types.size());
  EXPECT_EQ(inputs[OP_ARGUMENTS_MAX].kind, ValueKind::kUnknown);
  decoder.complete_more(0, record_of({word(16), word(17), word(1)}), inputs);
  for (size_t i = 0; i < types.size() - 1; ++i) {
    ASSERT_EQ(inputs[i].kind, ValueKind::kInt) << i;
    EXPECT_EQ(inputs[i].ints.at(0), static_cast<int64_t>(i));
  }
  EXPECT_EQ(inputs.back().kind, ValueKind::kBool);
  EXPECT_TRUE(inputs.back().boolean);
}

TEST(ArgumentDecoder, AScalarListOfFloatsArrivesInListElementRecords) {
  // _foreach_div_.ScalarList's scalars: every c10::Scalar ({tag, -, payload, -}) follows the entry.
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor[]", "Scalar[]"})});
  argument_value scalars = with_status(ARGUMENT_SCALAR_LIST);
  scalars.length = 3;
  std::vector<Value> values = decoder.decode(0, false, record_of({tensor_list(0, 0, 0), scalars}));
  ASSERT_EQ(values[1].kind, ValueKind::kDoubleList);
  EXPECT_TRUE(values[1].reals.empty());
  list_elements elements{};
  elements.argument = 1;
  elements.kind = LIST_OF_SCALARS;
  elements.count = 3;
  for (int i = 0; i < 3; ++i) {
    elements.ints[SCALAR_WORDS * i] = 0;  // HAS_d
    elements.ints[SCALAR_WORDS * i + 2] = std::bit_cast<int64_t>(0.5 * (i + 1));
  }
  ASSERT_TRUE(decoder.append_list_elements(elements, values));
  EXPECT_EQ(values[1].reals, (std::vector<double>{0.5, 1.0, 1.5}));

  // An int among them is another list: left partial, written unknown.
  std::vector<Value> other = decoder.decode(0, false, record_of({tensor_list(0, 0, 0), scalars}));
  elements.ints[SCALAR_WORDS] = 1;  // HAS_i
  EXPECT_FALSE(decoder.append_list_elements(elements, other));
}

TEST(ArgumentDecoder, AWrongLayoutIsRejectedAfterItsTrialTensors) {
  // Every window garbage: after kLayoutTrialTensors tensors the layout is judged wrong, and a
  // good tensor after that is unknown too.
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor"})});
  tensor_copy garbage{};
  garbage.impl = 0x1234;
  std::memset(garbage.window, 0xff, sizeof(garbage.window));
  for (uint32_t i = 0; i < ArgumentDecoder::kLayoutTrialTensors; ++i) {
    EXPECT_FALSE(decoder.layout_rejection().has_value());
    decoder.decode(0, false, record_of({tensor_slot(0)}, {garbage}));
  }
  ASSERT_TRUE(decoder.layout_rejection().has_value());
  EXPECT_NE(decoder.layout_rejection()->find("0 of the first 64"), std::string::npos) << *decoder.layout_rejection();
  const std::vector<Value> values = decoder.decode(0, false, record_of({tensor_slot(0)}, {tensor_window(kMatrix)}));
  EXPECT_EQ(values[0].kind, ValueKind::kUnknown);
}

TEST(ArgumentDecoder, ALayoutThatHoldsOnMostTensorsIsKept) {
  const ArgumentDecoder decoder(testing::torch113_tensor_impl_layout(), {plan_of({"Tensor"})});
  tensor_copy garbage{};
  std::memset(garbage.window, 0xff, sizeof(garbage.window));
  for (uint32_t i = 0; i < 2 * ArgumentDecoder::kLayoutTrialTensors; ++i)
    decoder.decode(0, false, record_of({tensor_slot(0)}, {i % 4 == 0 ? garbage : tensor_window(kMatrix)}));
  EXPECT_FALSE(decoder.layout_rejection().has_value());
  expect_tensor(decoder.decode(0, false, record_of({tensor_slot(0)}, {tensor_window(kMatrix)}))[0], kMatrix, "float", 4,
                "cpu");
}

}  // namespace
}  // namespace tprof
