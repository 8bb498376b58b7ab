#include "exporters/execution_trace_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
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
#include <vector>

#include "exporters/output_file.h"
#include "model/trace_model.h"

namespace tprof::exporters {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;  // keeps keys in file order, so that order can be asserted

constexpr uint64_t kWindowStartNs = 1'751'410'837'000'000'250;
constexpr uint64_t kWindowEndNs = kWindowStartNs + 10'000'000;
constexpr uint32_t kPid = 4242;
constexpr uint32_t kWorkerTid = 4300;
constexpr std::string_view kProcessRootName = "[pytorch|profiler|execution_trace|process]";
constexpr std::string_view kThreadRootName = "[pytorch|profiler|execution_trace|thread]";
constexpr std::string_view kOddName = "aten::\"odd\"\\name\n\x01";
constexpr std::string_view kOddSchema = "aten::odd(str s=\"a\\b\") -> Tensor";

uint64_t at(uint64_t offset_ns) { return kWindowStartNs + offset_ns; }

constexpr uint32_t kOddOperator = 3;
constexpr uint32_t kStepOperator = 4;
constexpr uint32_t kForwardOperator = 5;

// Main thread: ProfilerStep#0 covering mm (same start and end), which encloses two adds, the
// first enclosing a copy_. Worker thread: a user annotation covering three top-level ops, one
// with a name and schema full of characters JSON must escape. Entries are numbered as the span
// closer numbers them: record ids 2, 3, 4 (main), 6, 7 (worker), 8, 9 (main), 10, 11 (worker),
// each thread's entry id just before its first range (1 main, 5 worker).
model::Trace make_two_thread_trace() {
  model::Trace trace;
  trace.session = {.pid = kPid, .process_name = "python3", .window_start_unix_ns = kWindowStartNs};
  trace.summary = {.window_end_unix_ns = kWindowEndNs};
  trace.operators = {{"aten::mm", "aten::mm(Tensor self, Tensor mat2) -> Tensor"},
                     {"aten::add", "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"},
                     {"aten::copy_", ""},
                     {std::string(kOddName), std::string(kOddSchema)},
                     {"ProfilerStep#0", "", model::RangeKind::kUserAnnotation},
                     {"## forward ##", "", model::RangeKind::kUserAnnotation}};
  model::ThreadTrack main_thread{.tid = kPid, .name = "python3"};
  main_thread.spans = {
      {.start_ns = at(1'000), .end_ns = at(9'000), .operator_index = kStepOperator, .depth = 0},
      {.start_ns = at(1'000), .end_ns = at(9'000), .operator_index = 0, .depth = 0},
      {.start_ns = at(1'000), .end_ns = at(4'000), .operator_index = 1, .depth = 1},
      {.start_ns = at(2'000), .end_ns = at(3'000), .operator_index = 2, .depth = 2},
      {.start_ns = at(5'000), .end_ns = at(6'000), .operator_index = 1, .depth = 1},
  };
  model::ThreadTrack worker{.tid = kWorkerTid, .name = "worker"};
  worker.spans = {
      {.start_ns = at(1'500), .end_ns = at(8'000), .operator_index = kForwardOperator, .depth = 0},
      {.start_ns = at(1'500), .end_ns = at(3'000), .operator_index = 0, .depth = 0},
      {.start_ns = at(6'000), .end_ns = at(7'000), .operator_index = 1, .depth = 0},
      {.start_ns = at(7'500), .end_ns = at(7'600), .operator_index = kOddOperator, .depth = 0},
  };
  trace.threads = {main_thread, worker};
  model::number_entries(trace);
  return trace;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const ordered_json& attr(const ordered_json& node, std::string_view name) {
  for (const ordered_json& entry : node.at("attrs"))
    if (entry.at("name") == name) return entry.at("value");
  throw std::out_of_range("node " + node.at("id").dump() + " has no attr " + std::string(name));
}

uint64_t rf_id_of(const ordered_json& node) { return attr(node, "rf_id").get<uint64_t>(); }

bool is_root(const ordered_json& node) {
  return node.at("name") == kProcessRootName || node.at("name") == kThreadRootName;
}

class ExecutionTraceWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tprof_execution_trace_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    directory_ = pattern;
  }
  void TearDown() override { fs::remove_all(directory_); }

  ordered_json write_and_parse(const model::Trace& trace) {
    const fs::path path = directory_ / "host_4242.1.et.json";
    OutputFile out(path.string());
    write_execution_trace(trace, out);
    out.commit();
    return ordered_json::parse(read_file(path));  // throws, failing the test, on invalid JSON
  }

  // The nodes by id; fails the test on a duplicate id.
  static std::map<uint64_t, ordered_json> nodes_by_id(const ordered_json& document) {
    std::map<uint64_t, ordered_json> nodes;
    for (const ordered_json& node : document.at("nodes")) {
      const bool inserted = nodes.emplace(node.at("id").get<uint64_t>(), node).second;
      EXPECT_TRUE(inserted) << "duplicate node id " << node.at("id");
    }
    return nodes;
  }

  fs::path directory_;
};

TEST_F(ExecutionTraceWriterTest, WritesTheTopLevelKeysInTorchsOrder) {
  const ordered_json document = write_and_parse(make_two_thread_trace());
  std::vector<std::string> keys;
  for (const auto& [key, value] : document.items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"schema", "pid", "time", "start_ts", "nodes", "finish_ts"}));
  EXPECT_EQ(document.at("schema"), "1.1.1-chakra.0.0.4");
  EXPECT_EQ(document.at("pid"), kPid);
  EXPECT_TRUE(document.at("time").is_string());
  EXPECT_FALSE(document.at("time").get<std::string>().empty());
  EXPECT_EQ(document.at("start_ts"), kWindowStartNs / 1'000'000);
  EXPECT_EQ(document.at("finish_ts"), kWindowEndNs / 1'000'000);
}

TEST_F(ExecutionTraceWriterTest, WritesTheProcessRootAsNodeOneAndLast) {
  const ordered_json document = write_and_parse(make_two_thread_trace());
  const ordered_json& root = document.at("nodes").back();
  EXPECT_EQ(root.at("id"), 1);
  EXPECT_EQ(root.at("name"), kProcessRootName);
  EXPECT_EQ(root.at("ctrl_deps"), 1) << "the process root is its own parent";
  EXPECT_EQ(rf_id_of(root), 0U);
  EXPECT_EQ(attr(root, "tid"), 0);
  EXPECT_EQ(attr(root, "scope"), 7);
}

TEST_F(ExecutionTraceWriterTest, GivesEachThreadARootWithLogicalTidsInOrderOfFirstUse) {
  const ordered_json document = write_and_parse(make_two_thread_trace());
  std::vector<uint64_t> logical_tids;
  for (const ordered_json& node : document.at("nodes")) {
    if (node.at("name") != kThreadRootName) continue;
    EXPECT_EQ(node.at("ctrl_deps"), 1);
    EXPECT_EQ(rf_id_of(node), 0U);
    logical_tids.push_back(attr(node, "tid").get<uint64_t>());
  }
  EXPECT_EQ(logical_tids, (std::vector<uint64_t>{1, 2}));
}

TEST_F(ExecutionTraceWriterTest, NumbersThreadsByFirstUseNotByTrackOrder) {
  model::Trace trace;
  trace.session = {.pid = kPid, .window_start_unix_ns = kWindowStartNs};
  trace.summary = {.window_end_unix_ns = kWindowEndNs};
  trace.operators = {{"aten::add", ""}};
  trace.threads = {
      {.tid = kPid, .spans = {{.start_ns = at(5'000), .end_ns = at(6'000)}}},
      {.tid = kWorkerTid, .spans = {{.start_ns = at(1'000), .end_ns = at(2'000)}}},
  };
  model::number_entries(trace);
  const ordered_json document = write_and_parse(trace);
  for (const ordered_json& node : document.at("nodes")) {
    if (is_root(node)) continue;
    EXPECT_EQ(attr(node, "tid"), rf_id_of(node) == trace.threads[1].spans[0].record_id ? 1 : 2) << node.dump();
  }
}

// Nodes are written as their ranges close, as torch writes them at op exit (consumers sort by
// id). Ids follow the entry order, so a parent's id is below its children's.
TEST_F(ExecutionTraceWriterTest, WritesNodesAtExitNumberedInEnterOrder) {
  const ordered_json document = write_and_parse(make_two_thread_trace());
  const ordered_json& nodes = document.at("nodes");
  for (size_t i = 0; i + 1 < nodes.size(); ++i)  // all but the process root, which is last
    EXPECT_LT(nodes[i].at("ctrl_deps").get<uint64_t>(), nodes[i].at("id").get<uint64_t>()) << nodes[i].dump();
  std::vector<uint64_t> rf_ids_in_file_order;
  for (const ordered_json& node : nodes)
    if (!is_root(node)) rf_ids_in_file_order.push_back(rf_id_of(node));
  // By end: the worker's mm and main's copy_ (3000), add (4000), add (6000), the worker's add
  // (7000) and odd op (7600), its annotation (8000), the step and mm (9000), outermost first.
  EXPECT_EQ(rf_ids_in_file_order, (std::vector<uint64_t>{7, 8, 4, 9, 10, 11, 6, 2, 3}));
}

TEST_F(ExecutionTraceWriterTest, EveryParentExists) {
  const ordered_json document = write_and_parse(make_two_thread_trace());
  const auto nodes = nodes_by_id(document);
  ASSERT_TRUE(nodes.contains(1));
  for (const auto& [id, node] : nodes) {
    if (id == 1) continue;
    EXPECT_TRUE(nodes.contains(node.at("ctrl_deps").get<uint64_t>())) << node.dump();
  }
}

TEST_F(ExecutionTraceWriterTest, RfIdsAreExactlyTheModelsRecordIds) {
  const model::Trace trace = make_two_thread_trace();
  const ordered_json document = write_and_parse(trace);
  std::vector<uint64_t> rf_ids;
  for (const ordered_json& node : document.at("nodes"))
    if (!is_root(node)) rf_ids.push_back(rf_id_of(node));
  std::vector<uint64_t> record_ids;
  for (const model::ThreadTrack& thread : trace.threads)
    for (const model::OpSpan& span : thread.spans) record_ids.push_back(span.record_id);
  std::sort(rf_ids.begin(), rf_ids.end());
  std::sort(record_ids.begin(), record_ids.end());
  EXPECT_EQ(rf_ids, record_ids);
}

TEST_F(ExecutionTraceWriterTest, WritesEveryNodesKeysAndAttrsInTorchsOrderAndTypes) {
  const ordered_json document = write_and_parse(make_two_thread_trace());
  const std::vector<std::pair<std::string, std::string>> expected_attrs = {
      {"rf_id", "uint64"},   {"fw_parent", "uint64"},   {"seq_id", "int64"},
      {"scope", "uint64"},   {"tid", "uint64"},         {"fw_tid", "uint64"},
      {"op_schema", "string"}, {"kernel_backend", "string"}, {"kernel_file", "string"}};
  const ordered_json no_values = ordered_json::parse(
      R"({"values": [], "shapes": [], "types": [], "strides": []})");
  for (const ordered_json& node : document.at("nodes")) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : node.items()) keys.push_back(key);
    EXPECT_EQ(keys, (std::vector<std::string>{"id", "name", "ctrl_deps", "inputs", "outputs", "attrs"}));
    EXPECT_EQ(node.at("inputs"), no_values) << "key order too: " << node.at("inputs").dump();
    EXPECT_EQ(node.at("outputs"), no_values);
    std::vector<std::pair<std::string, std::string>> attrs;
    for (const ordered_json& entry : node.at("attrs")) {
      attrs.emplace_back(entry.at("name"), entry.at("type"));
      std::vector<std::string> entry_keys;
      for (const auto& [key, value] : entry.items()) entry_keys.push_back(key);
      EXPECT_EQ(entry_keys, (std::vector<std::string>{"name", "type", "value"}));
      EXPECT_EQ(entry.at("value").is_string(), entry.at("type") == "string") << entry.dump();
    }
    EXPECT_EQ(attrs, expected_attrs) << node.dump();
    EXPECT_EQ(attr(node, "seq_id"), -1);
    EXPECT_EQ(attr(node, "fw_parent"), 0);
    EXPECT_EQ(attr(node, "fw_tid"), 0);
  }
}

TEST_F(ExecutionTraceWriterTest, MarksOpsAsFunctionsWithTheirSchemaAndAnnotationsAsUserScope) {
  const model::Trace trace = make_two_thread_trace();
  const ordered_json document = write_and_parse(trace);
  std::map<uint64_t, ordered_json> by_rf_id;
  for (const ordered_json& node : document.at("nodes"))
    if (!is_root(node)) by_rf_id.emplace(rf_id_of(node), node);
  for (const model::ThreadTrack& thread : trace.threads) {
    for (const model::OpSpan& span : thread.spans) {
      const ordered_json& node = by_rf_id.at(span.record_id);
      const model::Operator& op = trace.operators[span.operator_index];
      EXPECT_EQ(node.at("name"), op.name);
      EXPECT_EQ(attr(node, "scope"), op.kind == model::RangeKind::kUserAnnotation ? 7 : 0);
      EXPECT_EQ(attr(node, "op_schema"), op.schema);
    }
  }
}

TEST_F(ExecutionTraceWriterTest, EscapesOddNamesAndSchemas) {
  const ordered_json document = write_and_parse(make_two_thread_trace());
  bool found = false;
  for (const ordered_json& node : document.at("nodes")) {
    if (is_root(node) || rf_id_of(node) != 11) continue;
    found = true;
    EXPECT_EQ(node.at("name"), kOddName);
    EXPECT_EQ(attr(node, "op_schema"), kOddSchema);
  }
  EXPECT_TRUE(found) << "no node with rf_id 11";
}

// An op with an input not read in full cannot be replayed as it ran: its schema moves from
// op_schema (without which PARAM's et_replay takes the node for a label and replays the ops
// inside it) to tprof_op_schema, and tprof_unread_values says what is missing. An unread output
// leaves the op replayable. Ops read in full carry neither attr.
TEST_F(ExecutionTraceWriterTest, OpsWithUnreadInputsCarryTheirSchemaWhereReplayersSkipThem) {
  model::Trace trace = make_two_thread_trace();
  model::ThreadTrack& main_thread = trace.threads[0];
  const model::Value cut{.kind = model::ValueKind::kIntList, .schema_type = "int[]", .ints = {1, 2}, .list_length = 1500};
  const model::Value unknown{.kind = model::ValueKind::kUnknown, .schema_type = "Tensor"};
  const model::Value two{.kind = model::ValueKind::kInt, .schema_type = "int", .ints = {2}};
  for (model::OpSpan& span : main_thread.spans) span.arguments_recorded = true;
  main_thread.spans[1].inputs = {two, cut};              // aten::mm, rf_id 3
  main_thread.spans[2].outputs = {unknown};              // aten::add, rf_id 4
  const ordered_json document = write_and_parse(trace);
  std::map<uint64_t, ordered_json> by_rf_id;
  for (const ordered_json& node : document.at("nodes"))
    if (!is_root(node)) by_rf_id.emplace(rf_id_of(node), node);

  const ordered_json& mm = by_rf_id.at(main_thread.spans[1].record_id);
  EXPECT_EQ(attr(mm, "op_schema"), "");
  EXPECT_EQ(attr(mm, "tprof_op_schema"), trace.operators[0].schema);
  EXPECT_EQ(attr(mm, "tprof_unread_values"), "input 1: 2 of 1500 elements read");
  EXPECT_EQ(mm.at("inputs").at("values"), ordered_json::parse("[2, [1, 2]]"));

  const ordered_json& add = by_rf_id.at(main_thread.spans[2].record_id);
  EXPECT_EQ(attr(add, "op_schema"), trace.operators[1].schema);
  EXPECT_EQ(attr(add, "tprof_unread_values"), "output 0: not read");
  EXPECT_THROW(attr(add, "tprof_op_schema"), std::out_of_range);

  const ordered_json& other_add = by_rf_id.at(main_thread.spans[4].record_id);
  EXPECT_THROW(attr(other_add, "tprof_unread_values"), std::out_of_range);
  EXPECT_THROW(attr(other_add, "tprof_op_schema"), std::out_of_range);
}

// The enclosing op or annotation on the same thread, by rf_id; 0 stands for the thread root.
TEST_F(ExecutionTraceWriterTest, ParentsAreTheEnclosingOpOrAnnotationOnTheSameThread) {
  const ordered_json document = write_and_parse(make_two_thread_trace());
  const auto nodes = nodes_by_id(document);
  std::map<uint64_t, uint64_t> parent_rf_id;
  std::map<uint64_t, uint64_t> logical_tid;
  for (const auto& [id, node] : nodes) {
    if (is_root(node)) continue;
    const ordered_json& parent = nodes.at(node.at("ctrl_deps").get<uint64_t>());
    if (parent.at("name") == kThreadRootName) {
      parent_rf_id[rf_id_of(node)] = 0;
      EXPECT_EQ(attr(parent, "tid"), attr(node, "tid")) << "a node hangs off its own thread's root";
    } else {
      parent_rf_id[rf_id_of(node)] = rf_id_of(parent);
    }
    logical_tid[rf_id_of(node)] = attr(node, "tid").get<uint64_t>();
  }
  const std::map<uint64_t, uint64_t> expected_parents = {
      {2, 0}, {3, 2}, {4, 3}, {8, 4}, {9, 3},  // main: ProfilerStep > mm > add > copy_; mm > add
      {6, 0}, {7, 6}, {10, 6}, {11, 6}};       // worker: annotation > three ops
  EXPECT_EQ(parent_rf_id, expected_parents);
  // Logical tids count threads by their first node written: the worker's mm ends with main's
  // copy_ and, starting earlier, is written first.
  for (const uint64_t rf_id : {2, 3, 4, 8, 9}) EXPECT_EQ(logical_tid[rf_id], 2U) << rf_id;
  for (const uint64_t rf_id : {6, 7, 10, 11}) EXPECT_EQ(logical_tid[rf_id], 1U) << rf_id;
}

TEST_F(ExecutionTraceWriterTest, AnEmptyTraceHasOnlyTheProcessRoot) {
  model::Trace trace;
  trace.session = {.pid = kPid, .window_start_unix_ns = kWindowStartNs};
  trace.summary = {.window_end_unix_ns = kWindowEndNs};
  const ordered_json document = write_and_parse(trace);
  ASSERT_EQ(document.at("nodes").size(), 1U);
  EXPECT_EQ(document.at("nodes")[0].at("id"), 1);
}

}  // namespace
}  // namespace tprof::exporters
