// End to end: tprof attached to a real training loop writes an Execution Trace beside its
// Chrome trace, and the pair links the way torch's own test_execution_trace.py demands: the
// sorted ET rf_ids equal the sorted "Record function id"s of the cpu_op and user_annotation
// events, exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/process_harness.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::fail_harness;
using testing::has_tracing_capabilities;

constexpr int kSteps = 3;
constexpr double kMinimumSchemaShare = 0.99;
// Generous: importing torch and attaching thousands of uprobes take seconds on a loaded machine.
constexpr auto kStartTimeout = 180s;
constexpr auto kWriteTimeout = 180s;
constexpr std::string_view kProcessRootName = "[pytorch|profiler|execution_trace|process]";
constexpr std::string_view kThreadRootName = "[pytorch|profiler|execution_trace|thread]";

const fs::path kSourceDir = testing::source_dir();
const fs::path kTprofBinary = testing::tprof_binary();
const fs::path kWorkloadScript = kSourceDir / "tests/workloads/train_loop.py";

const nlohmann::json& attr(const nlohmann::json& node, std::string_view name) {
  for (const nlohmann::json& entry : node.at("attrs"))
    if (entry.at("name") == name) return entry.at("value");
  throw std::out_of_range("node " + node.at("id").dump() + " has no attr " + std::string(name));
}

bool is_root(const nlohmann::json& node) {
  return node.at("name") == kProcessRootName || node.at("name") == kThreadRootName;
}

nlohmann::json load_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return nlohmann::json::parse(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Attaches to train_loop.py parked on its stdin trigger, runs the steps, stops tprof with
// SIGINT; the files are then complete. Returns tprof's stderr.
std::string record_training_steps(const fs::path& trace_path) {
  ChildProcess workload({.argv = {"/usr/bin/python3", kWorkloadScript.string(), "--steps",
                                  std::to_string(kSteps), "--trigger", "stdin"},
                         .pipe_stdin = true,
                         .pipe_stdout = true});
  const auto ready = workload.stdout_lines().read_line_containing("READY", kStartTimeout);
  if (!ready) fail_harness("workload never printed READY:\n" + workload.stdout_lines().transcript());
  const std::string python_pid = ready->substr(ready->find(' ') + 1);

  ChildProcess tprof({.argv = {kTprofBinary.string(), "attach", python_pid, "--output", trace_path.string()},
                      .pipe_stderr = true});
  if (!tprof.stderr_lines().read_line_containing("attached", kStartTimeout))
    fail_harness("tprof never printed 'attached':\n" + tprof.stderr_lines().transcript());
  workload.write_stdin("go\n");
  if (!workload.stdout_lines().read_line_containing("DONE", kStartTimeout))
    fail_harness("workload never printed DONE:\n" + workload.stdout_lines().transcript());
  tprof.send_signal(SIGINT);
  tprof.stderr_lines().read_to_end(kWriteTimeout);
  const auto status = tprof.wait_for_exit(kWriteTimeout);
  if (!status || !status->succeeded())
    fail_harness("tprof " + (status ? status->describe() : std::string("did not exit")) + ":\n" +
                 tprof.stderr_lines().transcript());
  workload.close_stdin();
  workload.wait_for_exit(kWriteTimeout);
  return tprof.stderr_lines().transcript();
}

class ExecutionTraceEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kTprofBinary)) << kTprofBinary << " is not built";
    if (!has_tracing_capabilities())
      GTEST_SKIP() << "\n*** SKIPPED: attaching uprobes needs root (CAP_SYS_ADMIN, or CAP_BPF + "
                      "CAP_PERFMON); the Execution Trace end to end is NOT tested ***";
  }

  ScratchDirectory scratch_;
};

TEST_F(ExecutionTraceEndToEndTest, WritesAnExecutionTraceThatLinksToTheChromeTrace) {
  const fs::path trace_path = scratch_.path() / "host_1.2.pt.trace.json";
  const fs::path et_path = scratch_.path() / "host_1.2.et.json";  // the default beside it
  const std::string stderr_text = record_training_steps(trace_path);
  std::cout << "tprof stderr:\n" << stderr_text;
  ASSERT_TRUE(fs::exists(trace_path)) << trace_path << " was not written";
  ASSERT_TRUE(fs::exists(et_path)) << et_path << " was not written";
  EXPECT_NE(stderr_text.find("Wrote " + trace_path.string() + " and " + et_path.string()), std::string::npos)
      << "the summary line names both files";

  const TraceJson chrome = load_trace(trace_path);
  const nlohmann::json et = load_json(et_path);
  EXPECT_EQ(et.at("schema"), "1.1.1-chakra.0.0.4");
  EXPECT_EQ(et.at("pid"), chrome.at("traceEvents").at(0).at("pid").get<int64_t>());

  // torch's get_kineto_rf_ids: every cpu_op and user_annotation.
  std::vector<uint64_t> chrome_rf_ids;
  std::map<uint64_t, std::string> cpu_op_names;
  for (const auto& event : chrome.at("traceEvents")) {
    const std::string category = event.value("cat", "");
    if (category != "cpu_op" && category != "user_annotation") continue;
    const uint64_t rf_id = event.at("args").at("Record function id").get<uint64_t>();
    chrome_rf_ids.push_back(rf_id);
    if (category == "cpu_op") cpu_op_names.emplace(rf_id, event.at("name").get<std::string>());
  }
  ASSERT_FALSE(cpu_op_names.empty()) << "the Chrome trace has no cpu_op events";

  std::map<uint64_t, nlohmann::json> nodes;
  std::vector<uint64_t> et_rf_ids;
  size_t op_nodes = 0;
  size_t op_nodes_with_schema = 0;
  for (const nlohmann::json& node : et.at("nodes")) {
    const uint64_t id = node.at("id").get<uint64_t>();
    EXPECT_TRUE(nodes.emplace(id, node).second) << "duplicate node id " << id;
    if (is_root(node)) continue;
    const uint64_t rf_id = attr(node, "rf_id").get<uint64_t>();
    et_rf_ids.push_back(rf_id);
    if (const auto op = cpu_op_names.find(rf_id); op != cpu_op_names.end()) {
      ++op_nodes;
      EXPECT_EQ(node.at("name"), op->second) << "rf_id " << rf_id;
      if (!attr(node, "op_schema").get<std::string>().empty()) ++op_nodes_with_schema;
    }
  }
  ASSERT_TRUE(nodes.contains(1)) << "no process root (id 1)";
  EXPECT_EQ(nodes.at(1).at("name"), kProcessRootName);

  // torch's test_execution_trace_with_kineto: the sorted lists are equal, exactly.
  std::sort(chrome_rf_ids.begin(), chrome_rf_ids.end());
  std::sort(et_rf_ids.begin(), et_rf_ids.end());
  EXPECT_EQ(et_rf_ids, chrome_rf_ids);

  EXPECT_EQ(op_nodes, cpu_op_names.size());
  const double schema_share = static_cast<double>(op_nodes_with_schema) / static_cast<double>(op_nodes);
  std::cout << op_nodes_with_schema << " of " << op_nodes << " op nodes carry an op_schema\n";
  EXPECT_GE(schema_share, kMinimumSchemaShare);

  // PARAM's rule: every parent exists (node 1 is its own); thread roots hang off node 1, and
  // every other node sits on its parent's logical thread.
  for (const auto& [id, node] : nodes) {
    if (id == 1) continue;
    const uint64_t parent_id = node.at("ctrl_deps").get<uint64_t>();
    ASSERT_TRUE(nodes.contains(parent_id)) << "node " << id << " has a missing parent " << parent_id;
    if (node.at("name") == kThreadRootName) {
      EXPECT_EQ(parent_id, 1U);
    } else {
      EXPECT_LT(parent_id, id) << "a parent enters before its children";
      EXPECT_EQ(attr(nodes.at(parent_id), "tid"), attr(node, "tid")) << "node " << id;
    }
  }
}

}  // namespace
}  // namespace tprof::test
