// Recorded arguments, autograd ranges and user annotations recorded as op spans, through both
// writers: the Chrome trace's record_shapes args and sequence numbers, and the Execution
// Trace's inputs/outputs, scopes, seq_id and fw_tid.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "exporters/chrome_trace_writer.h"
#include "exporters/execution_trace_writer.h"
#include "exporters/output_file.h"
#include "model/trace_model.h"

namespace tprof::exporters {
namespace {

namespace fs = std::filesystem;
using model::RangeKind;
using model::TensorValue;
using model::Value;
using model::ValueKind;
using nlohmann::ordered_json;

constexpr uint64_t kWindowStartNs = 1'751'410'837'000'000'250;
constexpr uint64_t kWindowEndNs = kWindowStartNs + 10'000'000;
constexpr uint32_t kPid = 4242;
constexpr uint32_t kAutogradTid = 4300;
constexpr const char* kMmSchema = "aten::mm(Tensor self, Tensor mat2) -> Tensor";
constexpr const char* kAddSchema = "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";

uint64_t at(uint64_t offset_ns) { return kWindowStartNs + offset_ns; }

// Operator indices.
constexpr uint32_t kMm = 0;
constexpr uint32_t kAdd = 1;
constexpr uint32_t kForwardAnnotation = 2;
constexpr uint32_t kEvaluateMmBackward = 3;
constexpr uint32_t kMmBackward = 4;

// Record ids, in start order.
constexpr uint64_t kAnnotationId = 1;
constexpr uint64_t kMmId = 2;
constexpr uint64_t kUnrecordedAddId = 3;
constexpr uint64_t kEvaluateId = 4;
constexpr uint64_t kBackwardNodeId = 5;
constexpr uint64_t kBackwardMmId = 6;
constexpr uint64_t kEmptyAddId = 7;

TensorValue tensor_facts(uint64_t impl, uint64_t storage, std::vector<int64_t> sizes, std::vector<int64_t> strides,
                         int64_t numel) {
  return {.impl_address = impl,
          .storage_address = storage,
          .sizes = {sizes.begin(), sizes.end()},
          .strides = {strides.begin(), strides.end()},
          .storage_offset = 0,
          .numel = numel,
          .dtype = "float",
          .itemsize = 4,
          .device = "cpu"};
}

Value tensor(const TensorValue& facts) { return {.kind = ValueKind::kTensor, .schema_type = "Tensor", .tensor = facts}; }

const TensorValue kA = tensor_facts(0xa000, 0x1a000, {4, 8}, {8, 1}, 32);
const TensorValue kB = tensor_facts(0xb000, 0x1b000, {8, 3}, {3, 1}, 24);
const TensorValue kC = tensor_facts(0xc000, 0x1c000, {4, 3}, {3, 1}, 12);
const TensorValue kGrad = tensor_facts(0xd000, 0x1d000, {4, 3}, {3, 1}, 12);
const TensorValue kBTransposed = tensor_facts(0xe000, 0x1b000, {3, 8}, {1, 3}, 24);  // a view of kB
const TensorValue kGradA = tensor_facts(0xf000, 0x1f000, {4, 8}, {8, 1}, 32);

// Main thread: a record_function range caught as an op span, covering a recorded mm (with a
// sequence number), an add recorded without arguments, and an add recorded with none to
// record (sequence number 0). Autograd thread: evaluate_function around MmBackward0 around
// the backward mm, forward thread 1.
model::Trace make_trace(std::string tensor_layout) {
  model::Trace trace;
  trace.session = {.pid = kPid,
                   .process_name = "python3",
                   .window_start_unix_ns = kWindowStartNs,
                   .tensor_layout = std::move(tensor_layout)};
  trace.summary = {.window_end_unix_ns = kWindowEndNs};
  trace.operators = {{"aten::mm", kMmSchema, RangeKind::kOperator},
                     {"aten::add", kAddSchema, RangeKind::kOperator},
                     {"## forward ##", "", RangeKind::kUserAnnotation},
                     {"autograd::engine::evaluate_function: MmBackward0", "", RangeKind::kBackwardEvaluate},
                     {"MmBackward0", "", RangeKind::kBackwardNode}};
  model::ThreadTrack main_thread{.tid = kPid, .name = "python3"};
  main_thread.spans = {
      {.start_ns = at(1'000), .end_ns = at(9'000), .record_id = kAnnotationId, .operator_index = kForwardAnnotation,
       .depth = 0},
      {.start_ns = at(1'000), .end_ns = at(4'000), .record_id = kMmId, .operator_index = kMm, .depth = 1,
       .arguments_recorded = true, .inputs = {tensor(kA), tensor(kB)}, .outputs = {tensor(kC)}, .sequence_number = 5},
      // Values without arguments_recorded are not written.
      {.start_ns = at(5'000), .end_ns = at(6'000), .record_id = kUnrecordedAddId, .operator_index = kAdd, .depth = 1,
       .arguments_recorded = false, .inputs = {tensor(kC), tensor(kC)}, .outputs = {tensor(kC)}},
      {.start_ns = at(7'000), .end_ns = at(8'000), .record_id = kEmptyAddId, .operator_index = kAdd, .depth = 1,
       .arguments_recorded = true, .sequence_number = 0},
  };
  model::ThreadTrack autograd{.tid = kAutogradTid, .name = "pt_autograd_0"};
  autograd.spans = {
      {.start_ns = at(6'500), .end_ns = at(8'500), .record_id = kEvaluateId, .operator_index = kEvaluateMmBackward,
       .depth = 0, .sequence_number = 5, .forward_thread = 1},
      {.start_ns = at(6'600), .end_ns = at(8'400), .record_id = kBackwardNodeId, .operator_index = kMmBackward,
       .depth = 1, .arguments_recorded = true, .inputs = {tensor(kGrad)}, .sequence_number = 5, .forward_thread = 1},
      {.start_ns = at(6'700), .end_ns = at(7'000), .record_id = kBackwardMmId, .operator_index = kMm, .depth = 2,
       .arguments_recorded = true, .inputs = {tensor(kGrad), tensor(kBTransposed)}, .outputs = {tensor(kGradA)}},
  };
  // Thread entry ids out of the way of the record ids above; parents as the closer sets them.
  main_thread.entry_id = 100;
  autograd.entry_id = 101;
  for (size_t i = 1; i < main_thread.spans.size(); ++i) main_thread.spans[i].parent_record_id = kAnnotationId;
  autograd.spans[1].parent_record_id = kEvaluateId;
  autograd.spans[2].parent_record_id = kBackwardNodeId;
  trace.threads = {main_thread, autograd};
  return trace;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::set<std::string> keys_of(const ordered_json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

const ordered_json& attr(const ordered_json& node, std::string_view name) {
  for (const ordered_json& entry : node.at("attrs"))
    if (entry.at("name") == name) return entry.at("value");
  throw std::out_of_range("node " + node.at("id").dump() + " has no attr " + std::string(name));
}

class RecordedArgumentsExportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tprof_recorded_arguments_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    directory_ = pattern;
  }
  void TearDown() override { fs::remove_all(directory_); }

  ordered_json write_chrome(const model::Trace& trace) {
    const fs::path path = directory_ / "host_4242.1.pt.trace.json";
    OutputFile out(path.string(), {.replace_existing = true});  // a test may write several
    write_chrome_trace(trace, "host_4242.1", out);
    out.commit();
    return ordered_json::parse(read_file(path));  // throws, failing the test, on invalid JSON
  }

  ordered_json write_et(const model::Trace& trace) {
    const fs::path path = directory_ / "host_4242.1.et.json";
    OutputFile out(path.string(), {.replace_existing = true});
    write_execution_trace(trace, out);
    out.commit();
    return ordered_json::parse(read_file(path));
  }

  // Chrome X events with a Record function id, by that id.
  static std::map<uint64_t, ordered_json> slices_by_record_id(const ordered_json& document) {
    std::map<uint64_t, ordered_json> slices;
    for (const ordered_json& event : document.at("traceEvents")) {
      if (event.at("ph") != "X" || !event.at("args").contains("Record function id")) continue;
      const bool inserted = slices.emplace(event.at("args").at("Record function id").get<uint64_t>(), event).second;
      EXPECT_TRUE(inserted) << event.dump();
    }
    return slices;
  }

  // ET nodes with a non-zero rf_id, by rf_id.
  static std::map<uint64_t, ordered_json> nodes_by_record_id(const ordered_json& document) {
    std::map<uint64_t, ordered_json> nodes;
    for (const ordered_json& node : document.at("nodes")) {
      const uint64_t rf_id = attr(node, "rf_id").get<uint64_t>();
      if (rf_id == 0) continue;
      const bool inserted = nodes.emplace(rf_id, node).second;
      EXPECT_TRUE(inserted) << node.dump();
    }
    return nodes;
  }

  fs::path directory_;
};

// ---- Chrome trace --------------------------------------------------------------------------------

TEST_F(RecordedArgumentsExportTest, ChromeHeaderSaysRecordShapesWhenTheLayoutIsKnown) {
  EXPECT_EQ(write_chrome(make_trace("matches the torch 1.13-2.1 layout")).at("record_shapes"), 1);
  EXPECT_EQ(write_chrome(make_trace("")).at("record_shapes"), 0);
}

TEST_F(RecordedArgumentsExportTest, ChromeCategoriesFollowTheRangeKind) {
  const auto slices = slices_by_record_id(write_chrome(make_trace("calibrated")));
  ASSERT_EQ(slices.size(), 7u);
  const std::map<uint64_t, std::pair<std::string, std::string>> expected = {
      {kAnnotationId, {"user_annotation", "## forward ##"}},
      {kMmId, {"cpu_op", "aten::mm"}},
      {kUnrecordedAddId, {"cpu_op", "aten::add"}},
      {kEvaluateId, {"cpu_op", "autograd::engine::evaluate_function: MmBackward0"}},
      {kBackwardNodeId, {"cpu_op", "MmBackward0"}},
      {kBackwardMmId, {"cpu_op", "aten::mm"}},
      {kEmptyAddId, {"cpu_op", "aten::add"}},
  };
  for (const auto& [record_id, category_and_name] : expected) {
    SCOPED_TRACE("record id " + std::to_string(record_id));
    const ordered_json& slice = slices.at(record_id);
    EXPECT_EQ(slice.at("cat"), category_and_name.first);
    EXPECT_EQ(slice.at("name"), category_and_name.second);
  }
  EXPECT_EQ(slices.at(kEvaluateId).at("tid"), kAutogradTid);
  EXPECT_EQ(slices.at(kAnnotationId).at("tid"), kPid);
}

TEST_F(RecordedArgumentsExportTest, ChromeInputArgsOnlyWhereArgumentsWereRecorded) {
  const auto slices = slices_by_record_id(write_chrome(make_trace("calibrated")));
  ASSERT_EQ(slices.size(), 7u);
  const std::set<std::string> base = {"External id", "Record function id", "Ev Idx"};
  const std::set<std::string> inputs = {"Input Dims", "Input type", "Input Strides", "Concrete Inputs"};
  const std::set<std::string> sequence = {"Sequence number", "Fwd thread id"};
  auto with = [&](std::initializer_list<const std::set<std::string>*> parts) {
    std::set<std::string> keys = base;
    for (const auto* part : parts) keys.insert(part->begin(), part->end());
    return keys;
  };
  EXPECT_EQ(keys_of(slices.at(kAnnotationId).at("args")), base);
  EXPECT_EQ(keys_of(slices.at(kMmId).at("args")), with({&inputs, &sequence}));
  EXPECT_EQ(keys_of(slices.at(kUnrecordedAddId).at("args")), base);
  EXPECT_EQ(keys_of(slices.at(kEvaluateId).at("args")), with({&sequence}));
  EXPECT_EQ(keys_of(slices.at(kBackwardNodeId).at("args")), with({&inputs, &sequence}));
  EXPECT_EQ(keys_of(slices.at(kBackwardMmId).at("args")), with({&inputs}));
  EXPECT_EQ(keys_of(slices.at(kEmptyAddId).at("args")), with({&inputs, &sequence}));
}

TEST_F(RecordedArgumentsExportTest, ChromeWritesTheRecordedShapes) {
  const auto slices = slices_by_record_id(write_chrome(make_trace("calibrated")));
  const ordered_json& mm = slices.at(kMmId).at("args");
  EXPECT_EQ(mm.at("Input Dims"), ordered_json::parse("[[4, 8], [8, 3]]"));
  EXPECT_EQ(mm.at("Input type"), ordered_json::parse(R"(["float", "float"])"));
  EXPECT_EQ(mm.at("Input Strides"), ordered_json::parse("[[8, 1], [3, 1]]"));
  EXPECT_EQ(mm.at("Concrete Inputs"), ordered_json::parse(R"(["", ""])"));

  const ordered_json& backward_mm = slices.at(kBackwardMmId).at("args");
  EXPECT_EQ(backward_mm.at("Input Dims"), ordered_json::parse("[[4, 3], [3, 8]]"));
  EXPECT_EQ(backward_mm.at("Input Strides"), ordered_json::parse("[[3, 1], [1, 3]]"));

  EXPECT_EQ(slices.at(kBackwardNodeId).at("args").at("Input Dims"), ordered_json::parse("[[4, 3]]"));

  const ordered_json& empty_add = slices.at(kEmptyAddId).at("args");
  for (const char* key : {"Input Dims", "Input type", "Input Strides", "Concrete Inputs"})
    EXPECT_EQ(empty_add.at(key), ordered_json::array()) << key;
}

TEST_F(RecordedArgumentsExportTest, ChromeSequenceNumbersOnlyWhenNotNegative) {
  const auto slices = slices_by_record_id(write_chrome(make_trace("calibrated")));
  EXPECT_EQ(slices.at(kMmId).at("args").at("Sequence number"), 5);
  EXPECT_EQ(slices.at(kMmId).at("args").at("Fwd thread id"), 0);
  EXPECT_EQ(slices.at(kEvaluateId).at("args").at("Sequence number"), 5);
  EXPECT_EQ(slices.at(kEvaluateId).at("args").at("Fwd thread id"), 1);
  EXPECT_EQ(slices.at(kBackwardNodeId).at("args").at("Sequence number"), 5);
  EXPECT_EQ(slices.at(kBackwardNodeId).at("args").at("Fwd thread id"), 1);
  EXPECT_EQ(slices.at(kEmptyAddId).at("args").at("Sequence number"), 0);
  EXPECT_EQ(slices.at(kEmptyAddId).at("args").at("Fwd thread id"), 0);
  EXPECT_FALSE(slices.at(kBackwardMmId).at("args").contains("Sequence number"));
  EXPECT_FALSE(slices.at(kUnrecordedAddId).at("args").contains("Fwd thread id"));
}

TEST_F(RecordedArgumentsExportTest, ChromeInputArgsComeBeforeTheSequenceNumber) {
  const auto slices = slices_by_record_id(write_chrome(make_trace("calibrated")));
  // Kineto's relative order of these six (where the ids and Ev Idx go is another matter).
  const std::set<std::string> ids = {"External id", "Record function id", "Ev Idx"};
  std::vector<std::string> keys;
  for (const auto& [key, value] : slices.at(kMmId).at("args").items())
    if (!ids.contains(key)) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"Input Dims", "Input type", "Input Strides", "Concrete Inputs",
                                            "Sequence number", "Fwd thread id"}));
}

// ---- Execution Trace -----------------------------------------------------------------------------

TEST_F(RecordedArgumentsExportTest, EtScopesFollowTheRangeKind) {
  const auto nodes = nodes_by_record_id(write_et(make_trace("calibrated")));
  ASSERT_EQ(nodes.size(), 7u);
  const std::map<uint64_t, uint64_t> expected_scope = {
      {kAnnotationId, 7}, {kMmId, 0},          {kUnrecordedAddId, 0}, {kEvaluateId, 0},
      {kBackwardNodeId, 1}, {kBackwardMmId, 0}, {kEmptyAddId, 0},
  };
  for (const auto& [record_id, scope] : expected_scope)
    EXPECT_EQ(attr(nodes.at(record_id), "scope"), scope) << "record id " << record_id;
  EXPECT_EQ(attr(nodes.at(kAnnotationId), "op_schema"), "");
  EXPECT_EQ(attr(nodes.at(kBackwardNodeId), "op_schema"), "");
  EXPECT_EQ(attr(nodes.at(kMmId), "op_schema"), kMmSchema);
  EXPECT_EQ(nodes.at(kEvaluateId).at("name"), "autograd::engine::evaluate_function: MmBackward0");
}

TEST_F(RecordedArgumentsExportTest, EtSequenceIdsAndForwardThreads) {
  const auto nodes = nodes_by_record_id(write_et(make_trace("calibrated")));
  const std::map<uint64_t, std::pair<int64_t, uint64_t>> expected = {
      {kAnnotationId, {-1, 0}},   {kMmId, {5, 0}},          {kUnrecordedAddId, {-1, 0}}, {kEvaluateId, {5, 1}},
      {kBackwardNodeId, {5, 1}}, {kBackwardMmId, {-1, 0}}, {kEmptyAddId, {0, 0}},
  };
  for (const auto& [record_id, seq_and_fw] : expected) {
    SCOPED_TRACE("record id " + std::to_string(record_id));
    EXPECT_EQ(attr(nodes.at(record_id), "seq_id").get<int64_t>(), seq_and_fw.first);
    EXPECT_EQ(attr(nodes.at(record_id), "fw_tid").get<uint64_t>(), seq_and_fw.second);
  }
}

TEST_F(RecordedArgumentsExportTest, EtNestsTheRangesAsOps) {
  const auto nodes = nodes_by_record_id(write_et(make_trace("calibrated")));
  auto id_of = [&](uint64_t record_id) { return nodes.at(record_id).at("id").get<uint64_t>(); };
  EXPECT_EQ(nodes.at(kMmId).at("ctrl_deps"), id_of(kAnnotationId));
  EXPECT_EQ(nodes.at(kUnrecordedAddId).at("ctrl_deps"), id_of(kAnnotationId));
  EXPECT_EQ(nodes.at(kEmptyAddId).at("ctrl_deps"), id_of(kAnnotationId));
  EXPECT_EQ(nodes.at(kBackwardNodeId).at("ctrl_deps"), id_of(kEvaluateId));
  EXPECT_EQ(nodes.at(kBackwardMmId).at("ctrl_deps"), id_of(kBackwardNodeId));
}

TEST_F(RecordedArgumentsExportTest, EtInputsAndOutputsOnlyWhereArgumentsWereRecorded) {
  const auto nodes = nodes_by_record_id(write_et(make_trace("calibrated")));
  const ordered_json empty = ordered_json::parse(R"({"values": [], "shapes": [], "types": [], "strides": []})");
  for (uint64_t record_id : {kAnnotationId, kUnrecordedAddId, kEvaluateId, kEmptyAddId}) {
    SCOPED_TRACE("record id " + std::to_string(record_id));
    EXPECT_EQ(nodes.at(record_id).at("inputs"), empty);
    EXPECT_EQ(nodes.at(record_id).at("outputs"), empty);
  }
  const ordered_json& mm = nodes.at(kMmId);
  EXPECT_EQ(mm.at("inputs").at("shapes"), ordered_json::parse("[[4,8],[8,3]]"));
  EXPECT_EQ(mm.at("inputs").at("strides"), ordered_json::parse("[[8,1],[3,1]]"));
  EXPECT_EQ(mm.at("inputs").at("types"), ordered_json::parse(R"j(["Tensor(float)","Tensor(float)"])j"));
  EXPECT_EQ(mm.at("outputs").at("shapes"), ordered_json::parse("[[4,3]]"));
  EXPECT_EQ(mm.at("outputs").at("types"), ordered_json::parse(R"j(["Tensor(float)"])j"));
  EXPECT_EQ(nodes.at(kBackwardNodeId).at("inputs").at("shapes"), ordered_json::parse("[[4,3]]"));
  EXPECT_EQ(nodes.at(kBackwardNodeId).at("outputs"), empty);
}

// Node ids are record ids plus one (1 is the process root). Tensors and storages take ids from
// their own counter, far above any node id, in the order nodes are written (as ranges close),
// and keep them wherever the same TensorImpl or storage recurs.
TEST_F(RecordedArgumentsExportTest, EtTensorIdsAreStableAndApartFromNodeIds) {
  const ordered_json document = write_et(make_trace("calibrated"));
  const auto nodes = nodes_by_record_id(document);
  for (const auto& [record_id, node] : nodes) EXPECT_EQ(node.at("id").get<uint64_t>(), record_id + 1);
  constexpr uint64_t kFirst = uint64_t{1} << 40;
  // mm closes first: its tensors and storages take the first ids.
  EXPECT_EQ(nodes.at(kMmId).at("inputs").at("values"),
            ordered_json::parse("[[" + std::to_string(kFirst) + "," + std::to_string(kFirst + 1) + ",0,32,4,\"cpu\"],[" +
                                std::to_string(kFirst + 2) + "," + std::to_string(kFirst + 3) + ",0,24,4,\"cpu\"]]"));
  EXPECT_EQ(nodes.at(kMmId).at("outputs").at("values"),
            ordered_json::parse("[[" + std::to_string(kFirst + 4) + "," + std::to_string(kFirst + 5) + ",0,12,4,\"cpu\"]]"));
  // The backward mm closes next: the gradient is new (kFirst + 6/7); kB's transposed view is a
  // new tensor (kFirst + 8) on kB's storage (kFirst + 3).
  const ordered_json backward_inputs = nodes.at(kBackwardMmId).at("inputs").at("values");
  EXPECT_EQ(backward_inputs, ordered_json::parse("[[" + std::to_string(kFirst + 6) + "," + std::to_string(kFirst + 7) +
                                                 ",0,12,4,\"cpu\"],[" + std::to_string(kFirst + 8) + "," +
                                                 std::to_string(kFirst + 3) + ",0,24,4,\"cpu\"]]"));
  // MmBackward0 closes after it and sees the same gradient tensor.
  EXPECT_EQ(nodes.at(kBackwardNodeId).at("inputs").at("values")[0], backward_inputs[0]);
  std::set<uint64_t> node_ids;
  for (const ordered_json& node : document.at("nodes")) node_ids.insert(node.at("id").get<uint64_t>());
  EXPECT_LT(*node_ids.rbegin(), kFirst);
}

}  // namespace
}  // namespace tprof::exporters
