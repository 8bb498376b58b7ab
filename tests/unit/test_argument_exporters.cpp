// How recorded op arguments come out: the Chrome trace's record_shapes args
// (exporters/chrome_input_args.h) and an Execution Trace node's inputs/outputs object
// (exporters/execution_trace_values.h), as exact text for one mix of every kind of value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exporters/chrome_input_args.h"
#include "exporters/execution_trace_values.h"
#include "model/trace_model.h"

namespace tprof::exporters {
namespace {

using model::TensorValue;
using model::Value;
using model::ValueKind;
using nlohmann::ordered_json;

const TensorValue kMatrix{.impl_address = 0x1000,
                          .storage_address = 0x5000,
                          .sizes = {2, 3},
                          .strides = {3, 1},
                          .storage_offset = 0,
                          .numel = 6,
                          .dtype = "float",
                          .itemsize = 4,
                          .device = "cpu"};
// A view into kMatrix's storage.
const TensorValue kCudaView{.impl_address = 0x3000,
                            .storage_address = 0x5000,
                            .sizes = {4},
                            .strides = {1},
                            .storage_offset = 6,
                            .numel = 4,
                            .dtype = "long int",
                            .itemsize = 8,
                            .device = "cuda:0"};

Value tensor(const TensorValue& facts, std::string schema_type = "Tensor") {
  return {.kind = ValueKind::kTensor, .schema_type = std::move(schema_type), .tensor = facts};
}
Value undefined_tensor(uint64_t impl) {
  return {.kind = ValueKind::kUndefinedTensor, .schema_type = "Tensor?", .tensor = {.impl_address = impl}};
}
Value none() { return {.kind = ValueKind::kNone, .schema_type = "Tensor?"}; }
Value integer(int64_t value) { return {.kind = ValueKind::kInt, .schema_type = "int", .ints = {value}}; }
Value boolean(bool value) { return {.kind = ValueKind::kBool, .schema_type = "bool", .boolean = value}; }
Value real(double value) { return {.kind = ValueKind::kDouble, .schema_type = "Scalar", .real = value}; }
Value int_list(std::vector<int64_t> copied, uint32_t length) {
  return {.kind = ValueKind::kIntList, .schema_type = "int[]", .ints = {copied.begin(), copied.end()}, .list_length = length};
}
Value tensor_list(std::vector<TensorValue> copied, uint32_t length) {
  return {.kind = ValueKind::kTensorList, .schema_type = "Tensor[]", .tensors = std::move(copied), .list_length = length};
}
Value unknown(std::string schema_type) { return {.kind = ValueKind::kUnknown, .schema_type = std::move(schema_type)}; }

// One of each: a tensor, an undefined tensor, None, int, bool, double, a complete int list, a
// tensor list (its first element kMatrix again), and unread values of four schema types.
std::vector<Value> mixed_values() {
  return {tensor(kMatrix),
          undefined_tensor(0x2000),
          none(),
          integer(7),
          boolean(true),
          real(0.5),
          int_list({2, 2}, 2),
          tensor_list({kMatrix, kCudaView}, 2),
          unknown("float"),
          unknown("int[]"),
          unknown("Tensor[]"),
          unknown("Tensor?")};
}

std::string chrome_args(const std::vector<Value>& inputs) {
  std::string out = "{\"Record function id\": 1";
  append_input_args(out, inputs);
  return out + "}";
}

// ---- Chrome: Input Dims, Input type, Input Strides, Concrete Inputs ---------------------------

TEST(ChromeInputArgs, WritesKinetosFourListsForAMixOfValues) {
  std::vector<Value> inputs = mixed_values();
  inputs.erase(inputs.begin() + 5);  // the double, whose text has its own test
  std::string out = "prefix";
  append_input_args(out, inputs);
  EXPECT_EQ(out,
            "prefix"
            ", \"Input Dims\": [[2, 3], [], [], [], [], [], [[2, 3], [4]], [], [], [], []]"
            ", \"Input type\": [\"float\", \"\", \"\", \"Scalar\", \"Scalar\", \"ScalarList\", \"TensorList\", "
            "\"Scalar\", \"ScalarList\", \"TensorList\", \"\"]"
            ", \"Input Strides\": [[3, 1], [], [], [], [], [], [[3, 1], [1]], [], [], [], []]"
            ", \"Concrete Inputs\": [\"\", \"\", \"\", \"7\", \"True\", \"[2, 2]\", \"\", \"\", \"\", \"\", \"\"]");
}

TEST(ChromeInputArgs, IsValidJsonWithOneEntryPerInput) {
  const std::vector<Value> inputs = mixed_values();
  const ordered_json args = ordered_json::parse(chrome_args(inputs));
  std::vector<std::string> keys;
  for (const auto& [key, value] : args.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"Record function id", "Input Dims", "Input type", "Input Strides",
                                            "Concrete Inputs"}));
  for (const char* key : {"Input Dims", "Input type", "Input Strides", "Concrete Inputs"})
    EXPECT_EQ(args.at(key).size(), inputs.size()) << key;
  EXPECT_EQ(args.at("Input type").at(5), "Scalar");
  // As an IValue prints it.
  EXPECT_EQ(args.at("Concrete Inputs").at(5), "0.5");
}

TEST(ChromeInputArgs, WritesNothingButTheKeysForNoInputs) {
  std::string out;
  append_input_args(out, {});
  EXPECT_EQ(out, ", \"Input Dims\": [], \"Input type\": [], \"Input Strides\": [], \"Concrete Inputs\": []");
}

// A list cut short (past LIST_ELEMENTS_MAX, or a lost record) gives the elements read and ends
// as Kineto ends the lists it truncates; tprof's own key says which inputs and how much.
TEST(ChromeInputArgs, ListsCutShortGiveTheirFirstElementsAndSaySo) {
  const ordered_json args = ordered_json::parse(chrome_args(
      {int_list({1, 2, 3}, 3), int_list({1}, 3), int_list({}, 0), int_list({}, 4), tensor_list({kCudaView}, 4)}));
  EXPECT_EQ(args.at("Concrete Inputs"), ordered_json::parse(R"(["[1, 2, 3]", "[1, ...]", "[]", "[...]", ""])"));
  EXPECT_EQ(args.at("Input type"),
            ordered_json::parse(R"(["ScalarList", "ScalarList", "ScalarList", "ScalarList", "TensorList"])"));
  EXPECT_EQ(args.at("Input Dims"), ordered_json::parse("[[], [], [], [], [[4]]]"));
  EXPECT_EQ(args.at("Inputs read in part"),
            ordered_json::parse(R"(["", "1 of 3 elements read", "", "0 of 4 elements read", "1 of 4 elements read"])"));
  EXPECT_FALSE(ordered_json::parse(chrome_args({int_list({1, 2}, 2)})).contains("Inputs read in part"));
}

TEST(ChromeInputArgs, SpellsBoolsAndNegativeInts) {
  const ordered_json args = ordered_json::parse(chrome_args({boolean(false), boolean(true), integer(-9)}));
  EXPECT_EQ(args.at("Concrete Inputs"), ordered_json::parse(R"(["False", "True", "-9"])"));
}

// Spellings read off torch 2.6's own Kineto trace (Concrete Inputs) of the same calls.
TEST(ChromeInputArgs, SpellsDoublesAsTorchsProfilerDoes) {
  const ordered_json args = ordered_json::parse(chrome_args(
      {real(0.9), real(-0.05), real(1e-08), real(0.5), real(2.0), real(0.0), real(-0.0), real(-4.0),
       real(1 - 0.9), real(1e10), real(-1.5e12), real(5e-324)}));
  EXPECT_EQ(args.at("Concrete Inputs"),
            ordered_json::parse(R"(["0.90000000000000002", "-0.050000000000000003", "1e-08", "0.5", "2.", "0.",
                                    "-0.", "-4.", "0.099999999999999978", "10000000000", "-1500000000000",
                                    "4.9406564584124654e-324"])"));
}

TEST(ChromeInputArgs, KeepsNonFiniteDoublesInsideStrings) {
  const std::string text = chrome_args({real(std::numeric_limits<double>::infinity()),
                                        real(-std::numeric_limits<double>::infinity()),
                                        real(std::numeric_limits<double>::quiet_NaN())});
  const ordered_json args = ordered_json::parse(text);  // throws on a bare inf or nan
  EXPECT_EQ(args.at("Concrete Inputs").at(0), "inf");
  EXPECT_EQ(args.at("Concrete Inputs").at(1), "-inf");
  EXPECT_NE(args.at("Concrete Inputs").at(2).get<std::string>().find("nan"), std::string::npos);
  EXPECT_EQ(args.at("Input type"), ordered_json::parse(R"(["Scalar", "Scalar", "Scalar"])"));
}

TEST(ChromeInputArgs, NamesUnreadValuesByTheirSchemaType) {
  const std::vector<std::string> types = {"float",   "int",      "SymInt",   "bool?",     "Scalar",       "ScalarType?",
                                          "Layout?", "int[]",    "int[2]",   "SymInt[]?", "float[]",      "Tensor[]",
                                          "Tensor",  "Tensor?",  "Tensor?[]", "str",      "Generator?",   ""};
  const std::vector<std::string> expected = {"Scalar",     "Scalar",     "Scalar",     "Scalar",     "Scalar",
                                             "Scalar",     "Scalar",     "ScalarList", "ScalarList", "ScalarList",
                                             "ScalarList", "TensorList", "",           "",           "",
                                             "",           "",           ""};
  std::vector<Value> inputs;
  for (const std::string& type : types) inputs.push_back(unknown(type));
  const ordered_json args = ordered_json::parse(chrome_args(inputs));
  ASSERT_EQ(args.at("Input type").size(), types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    EXPECT_EQ(args.at("Input type").at(i), expected[i]) << "schema type '" << types[i] << "'";
    EXPECT_EQ(args.at("Concrete Inputs").at(i), "") << types[i];
    EXPECT_EQ(args.at("Input Dims").at(i), ordered_json::array()) << types[i];
  }
}

TEST(ChromeInputArgs, UsesTheDtypeNameOfEachTensor) {
  const ordered_json args = ordered_json::parse(chrome_args({tensor(kCudaView), tensor(kMatrix, "Tensor?")}));
  EXPECT_EQ(args.at("Input type"), ordered_json::parse(R"(["long int", "float"])"));
  EXPECT_EQ(args.at("Input Dims"), ordered_json::parse("[[4], [2, 3]]"));
  EXPECT_EQ(args.at("Input Strides"), ordered_json::parse("[[1], [3, 1]]"));
  EXPECT_EQ(args.at("Concrete Inputs"), ordered_json::parse(R"(["", ""])"));
}

// ---- Execution Trace: values, shapes, types, strides --------------------------------------------

TEST(ExecutionTraceValues, WritesTorchsFourArraysForAMixOfValues) {
  uint64_t next_id = 10;
  TensorIds ids(next_id);
  std::string out = "prefix";
  append_execution_trace_values(out, mixed_values(), ids);
  EXPECT_EQ(out,
            "prefix"
            "{\"values\": [[10,11,0,6,4,\"cpu\"], [12,0,0,0,0,\"\"], \"<None>\", 7, true, 0.500000, [2,2], "
            "[[10,11,0,6,4,\"cpu\"],[13,11,6,4,8,\"cuda:0\"]], \"<Unknown>\", \"<Unknown>\", \"<Unknown>\", "
            "\"<Unknown>\"], "
            "\"shapes\": [[2,3], [], [], [], [], [], [[],[]], [[2,3],[4]], [], [], [], []], "
            "\"types\": [\"Tensor(float)\", \"Tensor(nullptr (uninitialized))\", \"None\", \"Int\", \"Bool\", "
            "\"Double\", \"GenericList[Int,Int]\", \"GenericList[Tensor(float),Tensor(long int)]\", \"Unknown\", "
            "\"Unknown\", \"Unknown\", \"Unknown\"], "
            "\"strides\": [[3,1], [], [], [], [], [], [[],[]], [[3,1],[1]], [], [], [], []]}");
  // Two tensors, one storage, one undefined tensor: four ids drawn from the node counter.
  EXPECT_EQ(next_id, 14u);
}

// What torch 2.6's own trace and ET write for a Device, a str, a bool[3] (convolution_backward's
// output_mask) and a Generator: the ET names them, the Chrome trace shows the bool list only.
std::vector<Value> device_string_and_bool_list() {
  return {{.kind = ValueKind::kDevice, .schema_type = "Device?", .text = "cpu"},
          {.kind = ValueKind::kString, .schema_type = "str", .text = "tanh"},
          {.kind = ValueKind::kBoolList, .schema_type = "bool[3]", .ints = {0, 1, 1}, .list_length = 3},
          {.kind = ValueKind::kObject, .schema_type = "Generator?", .text = "Generator"}};
}

TEST(ExecutionTraceValues, WritesDevicesStringsAndBoolListsAsTorchDoes) {
  uint64_t next_id = 10;
  TensorIds ids(next_id);
  std::string out;
  append_execution_trace_values(out, device_string_and_bool_list(), ids);
  EXPECT_EQ(out,
            "{\"values\": [\"cpu\", \"tanh\", [false,true,true], \"<Generator>\"], \"shapes\": [[], [], [[],[],[]], []], "
            "\"types\": [\"Device\", \"String\", \"GenericList[Bool,Bool,Bool]\", \"Generator\"], "
            "\"strides\": [[], [], [[],[],[]], []]}");
}

TEST(ChromeInputArgs, ShowsBoolListsButNotDevicesOrStrings) {
  std::string out;
  append_input_args(out, device_string_and_bool_list());
  EXPECT_EQ(out,
            ", \"Input Dims\": [[], [], [], []], \"Input type\": [\"\", \"\", \"ScalarList\", \"\"], "
            "\"Input Strides\": [[], [], [], []], \"Concrete Inputs\": [\"\", \"\", \"[False, True, True]\", \"\"]");
}

// A foreach op's Scalar[] of floats: torch's ET writes each as getScalarValue does, its Chrome
// trace as ivalueToStr does (max_digits10), and an undefined tensor in a list (index's None)
// as a tensor of no dtype.
std::vector<Value> double_list_and_undefined_element() {
  model::TensorValue none;
  none.impl_address = 0x9e60;
  none.dtype = "nullptr (uninitialized)";
  return {{.kind = ValueKind::kDoubleList, .schema_type = "Scalar[]", .list_length = 2, .reals = {0.0631981328759004, -1.5}},
          {.kind = ValueKind::kTensorList, .schema_type = "Tensor?[]", .tensors = {none}, .list_length = 1}};
}

TEST(ExecutionTraceValues, WritesDoubleListsAndUndefinedListElementsAsTorchDoes) {
  uint64_t next_id = 10;
  TensorIds ids(next_id);
  std::string out;
  append_execution_trace_values(out, double_list_and_undefined_element(), ids);
  EXPECT_EQ(out,
            "{\"values\": [[0.063198,-1.500000], [[10,0,0,0,0,\"\"]]], \"shapes\": [[[],[]], [[]]], "
            "\"types\": [\"GenericList[Double,Double]\", \"GenericList[Tensor(nullptr (uninitialized))]\"], "
            "\"strides\": [[[],[]], [[]]]}");
}

TEST(ChromeInputArgs, ShowsDoubleListsAsScalarLists) {
  std::string out;
  append_input_args(out, double_list_and_undefined_element());
  EXPECT_EQ(out,
            ", \"Input Dims\": [[], []], \"Input type\": [\"ScalarList\", \"\"], "
            "\"Input Strides\": [[], []], \"Concrete Inputs\": [\"[0.063198132875900398, -1.5]\", \"\"]");
}

TEST(ExecutionTraceValues, IsValidJsonWithParallelArrays) {
  uint64_t next_id = 2;
  TensorIds ids(next_id);
  std::string out;
  const std::vector<Value> values = mixed_values();
  append_execution_trace_values(out, values, ids);
  const ordered_json object = ordered_json::parse(out);
  std::vector<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"values", "shapes", "types", "strides"}));
  for (const char* key : {"values", "shapes", "types", "strides"}) EXPECT_EQ(object.at(key).size(), values.size()) << key;
  EXPECT_EQ(object.at("values").at(5).get<double>(), 0.5);
}

TEST(ExecutionTraceValues, WritesTheEmptyFormForNoValues) {
  uint64_t next_id = 5;
  TensorIds ids(next_id);
  std::string out;
  append_execution_trace_values(out, {}, ids);
  EXPECT_EQ(out, "{\"values\": [], \"shapes\": [], \"types\": [], \"strides\": []}");
  EXPECT_EQ(next_id, 5u);
}

TEST(ExecutionTraceValues, ReusesIdsPerAddressAcrossCalls) {
  uint64_t next_id = 100;
  TensorIds ids(next_id);
  std::string first;
  append_execution_trace_values(first, {tensor(kMatrix)}, ids);
  EXPECT_EQ(first, "{\"values\": [[100,101,0,6,4,\"cpu\"]], \"shapes\": [[2,3]], \"types\": [\"Tensor(float)\"], "
                   "\"strides\": [[3,1]]}");
  // The node counter moves on between calls, as the writer numbers nodes with it.
  EXPECT_EQ(next_id, 102u);
  ++next_id;
  std::string second;
  append_execution_trace_values(second, {tensor(kCudaView), tensor(kMatrix)}, ids);
  const ordered_json values = ordered_json::parse(second).at("values");
  EXPECT_EQ(values.at(0), ordered_json::parse(R"([103,101,6,4,8,"cuda:0"])"));  // kMatrix's storage id
  EXPECT_EQ(values.at(1), ordered_json::parse(R"([100,101,0,6,4,"cpu"])"));
  EXPECT_EQ(next_id, 104u);
}

TEST(ExecutionTraceValues, TensorIdsAreStablePerAddress) {
  uint64_t next_id = 1;
  TensorIds ids(next_id);
  EXPECT_EQ(ids.tensor(0xa), 1u);
  EXPECT_EQ(ids.storage(0xa), 2u);  // its own map: a storage at the same address is another id
  EXPECT_EQ(ids.tensor(0xb), 3u);
  EXPECT_EQ(ids.tensor(0xa), 1u);
  EXPECT_EQ(ids.storage(0xa), 2u);
  EXPECT_EQ(ids.storage(0xc), 4u);
  EXPECT_EQ(next_id, 5u);
}

// Memory stays bounded however many addresses a long recording sees: an address in use keeps
// its id across generations; one unseen for two generations is forgotten.
TEST(ExecutionTraceValues, TensorIdsForgetAddressesUnseenForTwoGenerations) {
  uint64_t next_id = 1;
  TensorIds ids(next_id);
  const uint64_t kept = ids.tensor(0x1);
  const uint64_t forgotten = ids.tensor(0x2);
  for (uint64_t address = 0x100; address < 0x100 + 3 * TensorIds::kGeneration; ++address) {
    ids.tensor(address);
    if (address % 1000 == 0) {
      EXPECT_EQ(ids.tensor(0x1), kept);  // in use all along
    }
  }
  EXPECT_EQ(ids.tensor(0x1), kept);
  EXPECT_NE(ids.tensor(0x2), forgotten);
}

TEST(ExecutionTraceValues, ATensorWithoutStorageGetsStorageIdZero) {
  uint64_t next_id = 7;
  TensorIds ids(next_id);
  TensorValue storageless = kMatrix;
  storageless.storage_address = 0;
  std::string out;
  append_execution_trace_values(out, {tensor(storageless)}, ids);
  EXPECT_EQ(ordered_json::parse(out).at("values").at(0), ordered_json::parse(R"([7,0,0,6,4,"cpu"])"));
  EXPECT_EQ(next_id, 8u);  // no id for the missing storage
}

TEST(ExecutionTraceValues, StoragesOfNullDataShareOneStorageId) {
  // Zero-size tensors (batch norm's empty buffers): torch's observer gives their null data
  // pointer an id like any address; tprof's decoder hands it on as address 1.
  uint64_t next_id = 7;
  TensorIds ids(next_id);
  TensorValue first = kMatrix;
  first.storage_address = 1;
  TensorValue second = first;
  second.impl_address += 0x100;
  std::string out;
  append_execution_trace_values(out, {tensor(first), tensor(second)}, ids);
  const auto values = ordered_json::parse(out).at("values");
  EXPECT_NE(values.at(0).at(1), 0);
  EXPECT_EQ(values.at(0).at(1), values.at(1).at(1));
}

TEST(ExecutionTraceValues, UndefinedTensorsShareTheSingletonsId) {
  uint64_t next_id = 20;
  TensorIds ids(next_id);
  std::string out;
  append_execution_trace_values(out, {undefined_tensor(0x2000), tensor(kMatrix), undefined_tensor(0x2000)}, ids);
  const ordered_json object = ordered_json::parse(out);
  EXPECT_EQ(object.at("values"), ordered_json::parse(R"([[20,0,0,0,0,""], [21,22,0,6,4,"cpu"], [20,0,0,0,0,""]])"));
  EXPECT_EQ(object.at("types").at(0), "Tensor(nullptr (uninitialized))");
  EXPECT_EQ(object.at("shapes").at(0), ordered_json::array());
  EXPECT_EQ(object.at("strides").at(0), ordered_json::array());
}

TEST(ExecutionTraceValues, WritesDoublesAsTorchsGetScalarValue) {
  uint64_t next_id = 1;
  TensorIds ids(next_id);
  std::string out;
  append_execution_trace_values(out,
                                {real(2.0), real(-0.25), real(std::numeric_limits<double>::infinity()),
                                 real(-std::numeric_limits<double>::infinity()),
                                 real(std::numeric_limits<double>::quiet_NaN())},
                                ids);
  EXPECT_EQ(out,
            "{\"values\": [2.000000, -0.250000, \"inf\", \"-inf\", \"nan\"], \"shapes\": [[], [], [], [], []], "
            "\"types\": [\"Double\", \"Double\", \"Double\", \"Double\", \"Double\"], "
            "\"strides\": [[], [], [], [], []]}");
  EXPECT_NO_THROW(ordered_json::parse(out));
}

TEST(ExecutionTraceValues, WritesIntsAndBools) {
  uint64_t next_id = 1;
  TensorIds ids(next_id);
  std::string out;
  append_execution_trace_values(out, {integer(-3), integer(INT64_MAX), boolean(false)}, ids);
  EXPECT_EQ(out,
            "{\"values\": [-3, 9223372036854775807, false], \"shapes\": [[], [], []], "
            "\"types\": [\"Int\", \"Int\", \"Bool\"], \"strides\": [[], [], []]}");
}

// A list BPF copied only in part gives the elements read, their shapes and types: what the
// node's tprof_unread_values attr says is the rest (ExecutionTraceWriter).
TEST(ExecutionTraceValues, ListsCopiedInPartGiveTheirFirstElements) {
  uint64_t next_id = 1;
  TensorIds ids(next_id);
  std::string out;
  append_execution_trace_values(
      out, {int_list({1}, 3), int_list({}, 0), tensor_list({kCudaView}, 4), tensor_list({kCudaView}, 1)}, ids);
  EXPECT_EQ(out,
            "{\"values\": [[1], [], [[1,2,6,4,8,\"cuda:0\"]], [[1,2,6,4,8,\"cuda:0\"]]], "
            "\"shapes\": [[[]], [], [[4]], [[4]]], "
            "\"types\": [\"GenericList[Int]\", \"GenericList[]\", \"GenericList[Tensor(long int)]\", "
            "\"GenericList[Tensor(long int)]\"], "
            "\"strides\": [[[]], [], [[1]], [[1]]]}");
}

}  // namespace
}  // namespace tprof::exporters
