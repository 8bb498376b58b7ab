// End to end: the Scalar values tprof writes in "Concrete Inputs" are the ones the target passed
// (tests/workloads/scalar_values.py calls ops with known Scalars), on torch 1.13, 2.6 and 2.14;
// and on torch 2.6 and 2.14, for the training loop and the broad model, every non-tensor input
// value in the Chrome trace and the Execution Trace agrees with what torch's own profiler and
// ExecutionTraceObserver record for the same steps (tests/e2e/scripts/compare_values.py), so do
// the ranges besides ATen ops (autograd's, and C++ scopes such as detach), and on torch 2.14 the
// python_function spans around each op (compare_python_spans.py). A wrong value is worse than
// none: an unknown one is written "" (or "<Unknown>" in the ET), never a guess.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;

// The Concrete Inputs of an op event at its Scalar arguments, in schema order.
std::vector<std::string> scalar_inputs(const TraceJson& event) {
  std::vector<std::string> values;
  const auto& args = event["args"];
  if (!args.contains("Input type") || !args.contains("Concrete Inputs")) return values;
  const auto& types = args["Input type"];
  const auto& concrete = args["Concrete Inputs"];
  for (size_t i = 0; i < types.size() && i < concrete.size(); ++i)
    if (types[i] == "Scalar") values.push_back(concrete[i].get<std::string>());
  return values;
}

// Records the workload's calls with tprof and checks each call's Scalars in the trace.
void expect_known_scalars(const WorkloadEnvironment& environment, const fs::path& trace_path) {
  const fs::path expected_file = "expected.json";
  record_workload_with_tprof(environment, {"--expected-out", (environment.scratch_for_target / expected_file).string()},
                             trace_path, {"--no-python", "--no-et"});
  const nlohmann::json expected =
      nlohmann::json::parse(std::ifstream(environment.scratch_for_us / expected_file));
  const TraceJson trace = load_trace(trace_path);
  std::vector<const TraceJson*> ops;
  for (const auto& event : trace["traceEvents"])
    if (event.value("cat", "") == "cpu_op") ops.push_back(&event);
  std::stable_sort(ops.begin(), ops.end(), [](const TraceJson* a, const TraceJson* b) {
    return (*a)["ts"].get<long double>() < (*b)["ts"].get<long double>();
  });
  // Each expected call is the next op of its name, in start order.
  auto next = ops.begin();
  for (const auto& call : expected) {
    const std::string name = call[0];
    SCOPED_TRACE(name + " " + call[1].dump());
    next = std::find_if(next, ops.end(), [&](const TraceJson* op) { return (*op)["name"] == name; });
    ASSERT_NE(next, ops.end()) << name << " is missing from the trace";
    EXPECT_EQ(scalar_inputs(**next), call[1].get<std::vector<std::string>>());
    ++next;
  }
}

TEST(ScalarValues, AreThePassedValuesOnTorch113) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; Scalar values are NOT tested ***";
  ScratchDirectory scratch;
  expect_known_scalars(host_workload(scratch.path(), workload_script("scalar_values.py")),
                       scratch.path() / "values.pt.trace.json");
}

// torch 2.6 (trixie) and torch 2.14 (sid, GCC 16), each in its chroot.
class RootScalarValues : public ::testing::TestWithParam<TorchRoot> {};

TEST_P(RootScalarValues, AreThePassedValues) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; Scalar values are NOT tested ***";
  const auto root = RootWorkload::make(GetParam(), workload_script("scalar_values.py"));
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "Scalar values");
  ScratchDirectory scratch;
  expect_known_scalars(root->environment(), scratch.path() / "values.pt.trace.json");
}

INSTANTIATE_TEST_SUITE_P(Torch2, RootScalarValues, ::testing::Values(TorchRoot::kTrixie, TorchRoot::kSid),
                         [](const auto& info) { return suite_name(info.param); });

// Lists past LIST_ELEMENTS_MAX (1024) elements, passed by tests/workloads/long_lists.py: their
// first 1024 elements are written and the list is marked cut short, in the Chrome trace, in the
// ET (where the node's schema moves aside, so that et_replay does not replay it) and on the console.
constexpr int kLongListLength = 1500;
constexpr int kListElementsMax = 1024;
const std::string kCutShort = "1024 of 1500 elements read";

const TraceJson& only_op(const TraceJson& trace, const std::string& name) {
  const TraceJson* found = nullptr;
  for (const auto& event : trace["traceEvents"]) {
    if (event.value("cat", "") != "cpu_op" || event["name"] != name) continue;
    EXPECT_EQ(found, nullptr) << "more than one " << name;
    found = &event;
  }
  if (!found) throw std::runtime_error(name + " is missing from the trace");
  return *found;
}

const nlohmann::json& only_node(const nlohmann::json& et, const std::string& name) {
  const nlohmann::json* found = nullptr;
  for (const auto& node : et.at("nodes")) {
    if (node.at("name") != name) continue;
    EXPECT_EQ(found, nullptr) << "more than one " << name;
    found = &node;
  }
  if (!found) throw std::runtime_error(name + " is missing from the ET");
  return *found;
}

std::string node_attr(const nlohmann::json& node, const std::string& name) {
  for (const auto& attr : node.at("attrs"))
    if (attr.at("name") == name) return attr.at("value").get<std::string>();
  return "(no " + name + ")";
}

void expect_lists_cut_short(const WorkloadEnvironment& environment, const fs::path& scratch) {
  const fs::path trace_path = scratch / "lists.pt.trace.json";
  const fs::path et_path = scratch / "lists.et.json";
  const std::string console = record_workload_with_tprof(
      environment, {"--length", std::to_string(kLongListLength)}, trace_path, {"--no-python", "--et", et_path.string()});
  EXPECT_NE(console.find("could not be read in full"), std::string::npos) << console;
  EXPECT_NE(console.find("aten::cat input 0"), std::string::npos) << console;
  EXPECT_NE(console.find("aten::split_with_sizes input 1"), std::string::npos) << console;
  const std::vector<std::string> violations = validate_trace_file(trace_path);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations.front();

  const TraceJson trace = load_trace(trace_path);
  const TraceJson& cat = only_op(trace, "aten::cat");
  EXPECT_EQ(cat["args"]["Input Dims"][0].size(), static_cast<size_t>(kListElementsMax));
  EXPECT_EQ(cat["args"]["Input Dims"][0][kListElementsMax - 1].dump(), "[2]");
  EXPECT_EQ(cat["args"]["Inputs read in part"][0], kCutShort);
  const TraceJson& split = only_op(trace, "aten::split_with_sizes");
  std::string ones = "[";
  for (int i = 0; i < kListElementsMax; ++i) ones += "1, ";
  EXPECT_EQ(split["args"]["Concrete Inputs"][1], ones + "...]");
  EXPECT_EQ(split["args"]["Inputs read in part"][1], kCutShort);

  const nlohmann::json et = nlohmann::json::parse(std::ifstream(et_path));
  const nlohmann::json& cat_node = only_node(et, "aten::cat");
  EXPECT_EQ(cat_node.at("inputs").at("values").at(0).size(), static_cast<size_t>(kListElementsMax));
  EXPECT_EQ(node_attr(cat_node, "op_schema"), "") << "et_replay must not replay it as it ran";
  EXPECT_TRUE(node_attr(cat_node, "tprof_op_schema").starts_with("aten::cat(")) << node_attr(cat_node, "tprof_op_schema");
  EXPECT_EQ(node_attr(cat_node, "tprof_unread_values"), "input 0: " + kCutShort);
  const nlohmann::json& split_node = only_node(et, "aten::split_with_sizes");
  EXPECT_EQ(split_node.at("inputs").at("values").at(1).size(), static_cast<size_t>(kListElementsMax));
  // A returned Tensor[] is read as far as an input one, in continuation records of the exit.
  EXPECT_EQ(node_attr(split_node, "tprof_unread_values"), "input 1: " + kCutShort + "; output 0: " + kCutShort);
  const nlohmann::json& pieces = split_node.at("outputs").at("shapes").at(0);
  ASSERT_EQ(pieces.size(), static_cast<size_t>(kListElementsMax));
  for (const nlohmann::json& piece : pieces) EXPECT_EQ(piece.dump(), "[1]");
}

TEST(LongLists, AreCutAtTheBoundAndSaySoOnTorch113) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; long lists are NOT tested ***";
  ScratchDirectory scratch;
  expect_lists_cut_short(host_workload(scratch.path(), workload_script("long_lists.py")), scratch.path());
}

class RootLongLists : public ::testing::TestWithParam<TorchRoot> {};

TEST_P(RootLongLists, AreCutAtTheBoundAndSaySo) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; long lists are NOT tested ***";
  const auto root = RootWorkload::make(GetParam(), workload_script("long_lists.py"));
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "long lists");
  ScratchDirectory scratch;
  expect_lists_cut_short(root->environment(), scratch.path());
}

INSTANTIATE_TEST_SUITE_P(Torch2, RootLongLists, ::testing::Values(TorchRoot::kTrixie, TorchRoot::kSid),
                         [](const auto& info) { return suite_name(info.param); });

// A comparison script's table, echoed to the test log; fails the test when the script does.
void expect_script_passes(const std::string& script, const std::vector<std::string>& arguments) {
  std::vector<std::string> command = {"/usr/bin/python3", testing::source_dir() + "/tests/e2e/scripts/" + script};
  command.insert(command.end(), arguments.begin(), arguments.end());
  const CommandResult comparison = run_command(command, std::chrono::minutes(2));
  std::string table;
  for (const std::string& line : comparison.stdout_lines) table += line + "\n";
  std::cout << table;
  ASSERT_TRUE(comparison.status.has_value()) << script << " did not finish";
  EXPECT_TRUE(comparison.status->succeeded()) << script << ": " << comparison.status->describe() << "\n" << table;
}

// The bar, on the same steps recorded by torch's own profiler and by tprof:
// - no value contradicts torch's, and at least 99% of the values torch gives are present, in
//   the Chrome trace and in the ET;
// - the ranges besides ATen ops (the autograd engine's, named C++ scopes) are the same multiset;
// - where torch's Python tracer works (torch 2.14; 2.6's segfaults), the chain of
//   python_function and nn.Module spans around each op agrees for at least 99% of ops.
class TorchAgreement : public ::testing::TestWithParam<RootCase> {};

TEST_P(TorchAgreement, ValuesRangesAndPythonSpansAgreeWithTorchsProfiler) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; agreement with torch is NOT tested ***";
  const RootCase& agreement = GetParam();
  const auto root = RootWorkload::make(agreement.root, workload_script(agreement.workload));
  if (!root) GTEST_SKIP() << missing_root_message(agreement.root, "the agreement of values with torch's");
  constexpr int kSteps = 3;
  const bool python_spans = agreement.root == TorchRoot::kSid;
  const WorkloadEnvironment& environment = root->environment();
  std::vector<std::string> reference = {"--steps", std::to_string(kSteps), "--kineto-trace-out",
                                        (environment.scratch_for_target / "torch.pt.trace.json").string(),
                                        "--execution-trace-out", (environment.scratch_for_target / "torch.et.json").string()};
  if (python_spans) reference.push_back("--with-stack");
  run_workload(environment, reference);
  const fs::path trace_path = environment.scratch_for_us / "tprof.pt.trace.json";
  const fs::path torch_trace = environment.scratch_for_us / "torch.pt.trace.json";
  record_workload_with_tprof(environment, {"--steps", std::to_string(kSteps)}, trace_path);
  expect_script_passes("compare_values.py",
                       {"--torch-trace", torch_trace.string(), "--torch-et", (environment.scratch_for_us / "torch.et.json").string(),
                        "--tprof-trace", trace_path.string(), "--tprof-et",
                        (environment.scratch_for_us / "execution_trace" / "tprof.et.json").string(), "--min-present-share",
                        "0.99"});

  const auto non_aten_ranges = [](const fs::path& path) {
    NameCounts counts = complete_event_name_counts(load_trace(path), "cpu_op");
    std::erase_if(counts, [](const auto& entry) { return entry.first.starts_with("aten::"); });
    return counts;
  };
  const NameCounts torch_ranges = non_aten_ranges(torch_trace);
  EXPECT_EQ(non_aten_ranges(trace_path), torch_ranges);
  // SGD's momentum buffers go through autograd's detach, 10 a step: the named scopes are there.
  if (agreement.workload == "train_loop.py") {
    EXPECT_EQ(torch_ranges.count("detach") ? torch_ranges.at("detach") : 0, 10u * kSteps);
  }

  if (python_spans) {
    expect_script_passes("compare_python_spans.py",
                         {"--torch-trace", torch_trace.string(), "--tprof-trace", trace_path.string(), "--min-share", "0.99"});
  } else {
    std::cout << "python spans NOT compared on " << describe(agreement.root)
              << ": its Python tracer segfaults under with_stack=True\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Torch2, TorchAgreement, ::testing::ValuesIn(root_cases()),
                         [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace tprof::test
