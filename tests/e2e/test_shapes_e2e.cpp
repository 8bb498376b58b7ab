// End to end: what tprof records of each op's inputs (torch.profiler's record_shapes) and of the
// autograd engine, held against torch's own profiler running the same training steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using testing::has_tracing_capabilities;

constexpr int kSteps = 3;
constexpr double kMinimumShapeRecall = 0.98;     // the bar for (op, Input Dims)
constexpr double kMinimumBackwardRecall = 0.95;  // and for the autograd engine's events
constexpr double kMinimumFlowRecall = 0.95;      // fwdbwd pairs, held to the same bar
constexpr std::string_view kEvaluateFunction = "autograd::engine::evaluate_function: ";

using Multiset = std::map<std::string, size_t>;

struct Recall {
  size_t matched = 0;
  size_t expected = 0;
  double value() const { return expected == 0 ? 0.0 : static_cast<double>(matched) / static_cast<double>(expected); }
};

Recall recall_of(const Multiset& recorded, const Multiset& expected) {
  Recall recall;
  for (const auto& [key, count] : expected) {
    recall.expected += count;
    if (const auto found = recorded.find(key); found != recorded.end()) recall.matched += std::min(count, found->second);
  }
  return recall;
}

// Keys `expected` has more of than `recorded`, with both counts under the given labels.
std::string describe_missing(const Multiset& recorded, const Multiset& expected,
                             const std::string& expected_label = "torch", const std::string& recorded_label = "tprof",
                             size_t limit = 12) {
  std::string text;
  for (const auto& [key, count] : expected) {
    const auto found = recorded.find(key);
    const size_t have = found == recorded.end() ? 0 : found->second;
    if (have >= count || limit == 0) continue;
    --limit;
    text += "  " + key + ": " + expected_label + " " + std::to_string(count) + ", " + recorded_label + " " +
            std::to_string(have) + "\n";
  }
  return text;
}

// "aten::mm [[8, 10], [10, 32]]": an op with its Input Dims, as one comparable key.
std::string op_key(const std::string& name, const nlohmann::json& dims) { return name + " " + dims.dump(); }

// "aten::mm -> MmBackward0": the two ends of a fwdbwd flow, by name.
std::string flow_key(const std::string& forward, const std::string& backward) { return forward + " -> " + backward; }

struct Recorded {
  Multiset op_shapes;
  Multiset backward_events;
  Multiset flows;
  size_t ops_with_shapes = 0;
  size_t ops = 0;
};

Recorded read_tprof_trace(const fs::path& path) {
  const TraceJson trace = load_trace(path);
  Recorded recorded;
  // A flow end names the slice that starts at its timestamp on its thread; where slices share
  // a start, the innermost (written last) is the op that created the node.
  using Place = std::pair<int64_t, long double>;  // (tid, ts)
  std::map<Place, std::string> cpu_op_at;
  std::map<uint64_t, Place> flow_starts;
  std::vector<std::pair<uint64_t, Place>> flow_ends;
  for (const auto& event : trace.at("traceEvents")) {
    if (!event.contains("ts") || !event.contains("tid") || !event.at("tid").is_number()) continue;
    const Place place{event.at("tid").get<int64_t>(), event.at("ts").get<long double>()};
    if (event.value("cat", "") == "fwdbwd") {
      if (event.at("ph") == "s") flow_starts[event.at("id").get<uint64_t>()] = place;
      if (event.at("ph") == "f") flow_ends.emplace_back(event.at("id").get<uint64_t>(), place);
    } else if (event.value("ph", "") == "X" && event.value("cat", "") == "cpu_op") {
      cpu_op_at[place] = event.at("name").get<std::string>();
    }
  }
  for (const auto& [id, end] : flow_ends) {
    const auto start = flow_starts.find(id);
    if (start == flow_starts.end() || !cpu_op_at.contains(start->second) || !cpu_op_at.contains(end)) continue;
    ++recorded.flows[flow_key(cpu_op_at.at(start->second), cpu_op_at.at(end))];
  }
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("ph", "") != "X" || event.value("cat", "") != "cpu_op") continue;
    const std::string name = event.at("name").get<std::string>();
    const auto& args = event.at("args");
    if (name.starts_with("aten::")) {
      ++recorded.ops;
      if (!args.contains("Input Dims")) continue;
      ++recorded.ops_with_shapes;
      ++recorded.op_shapes[op_key(name, nlohmann::json::parse(args.at("Input Dims").dump()))];
    } else {
      ++recorded.backward_events[name];  // the autograd engine's, or a named C++ scope (below)
    }
  }
  // As the reference takes them (train_loop.py autograd_events): evaluate_function ranges and
  // the nodes they name; named C++ scopes such as detach are neither.
  std::set<std::string> node_names;
  for (const auto& [name, count] : recorded.backward_events)
    if (name.starts_with(kEvaluateFunction)) node_names.insert(name.substr(std::string(kEvaluateFunction).size()));
  std::erase_if(recorded.backward_events, [&](const auto& entry) {
    return !entry.first.starts_with(kEvaluateFunction) && !node_names.contains(entry.first);
  });
  return recorded;
}

struct Reference {
  Multiset op_shapes;
  Multiset backward_events;
  Multiset flows;
};

Reference read_reference(const fs::path& path) {
  std::ifstream in(path);
  const nlohmann::json json = nlohmann::json::parse(in);
  std::cout << "reference: torch " << json.at("torch").get<std::string>() << '\n';
  Reference reference;
  const auto& ops = json.at("ops");
  const auto& shapes = json.at("shapes");
  for (size_t i = 0; i < ops.size(); ++i) ++reference.op_shapes[op_key(ops[i].get<std::string>(), shapes[i])];
  for (const auto& name : json.at("autograd")) ++reference.backward_events[name.get<std::string>()];
  for (const auto& pair : json.at("fwdbwd"))
    ++reference.flows[flow_key(pair[0].get<std::string>(), pair[1].get<std::string>())];
  return reference;
}

void expect_shapes_and_backward_match_torch(const WorkloadEnvironment& environment) {
  const fs::path trace_path = environment.scratch_for_us / "shapes.pt.trace.json";
  const std::string stderr_text =
      record_workload_with_tprof(environment, {"--steps", std::to_string(kSteps)}, trace_path, {"--no-et"});
  std::cout << "tprof stderr:\n" << stderr_text;
  EXPECT_NE(stderr_text.find("with shapes"), std::string::npos) << "tprof did not calibrate TensorImpl";
  run_workload(environment, {"--steps", std::to_string(kSteps), "--reference-out",
                             (environment.scratch_for_target / "reference.json").string()});

  const Recorded recorded = read_tprof_trace(trace_path);
  const Reference reference = read_reference(environment.scratch_for_us / "reference.json");
  ASSERT_GT(recorded.ops, 0U);
  EXPECT_EQ(recorded.ops_with_shapes, recorded.ops) << "every op carries Input Dims";

  const Recall shapes = recall_of(recorded.op_shapes, reference.op_shapes);
  const Recall shapes_precision = recall_of(reference.op_shapes, recorded.op_shapes);
  std::cout << std::fixed << std::setprecision(4) << environment.description << ": (op, Input Dims) recall "
            << shapes.value() << " (" << shapes.matched << "/" << shapes.expected << "), precision "
            << shapes_precision.value() << " (" << shapes_precision.matched << "/" << shapes_precision.expected
            << ")\nlargest shortfalls:\n"
            << describe_missing(recorded.op_shapes, reference.op_shapes) << "largest excess:\n"
            << describe_missing(reference.op_shapes, recorded.op_shapes, "tprof", "torch");
  ::testing::Test::RecordProperty("shape_recall", std::to_string(shapes.value()));
  EXPECT_GE(shapes.value(), kMinimumShapeRecall);
  EXPECT_GE(shapes_precision.value(), kMinimumShapeRecall);

  const Recall backward = recall_of(recorded.backward_events, reference.backward_events);
  // The other way round: what tprof recorded that torch did not (invented or misnamed nodes).
  const Recall backward_precision = recall_of(reference.backward_events, recorded.backward_events);
  std::cout << environment.description << ": autograd event recall " << backward.value() << " ("
            << backward.matched << "/" << backward.expected << "), precision " << backward_precision.value()
            << " (" << backward_precision.matched << "/" << backward_precision.expected
            << ")\nlargest shortfalls:\n"
            << describe_missing(recorded.backward_events, reference.backward_events) << "largest excess:\n"
            << describe_missing(reference.backward_events, recorded.backward_events, "tprof", "torch");
  ::testing::Test::RecordProperty("backward_recall", std::to_string(backward.value()));
  size_t evaluate_functions = 0;
  for (const auto& [name, count] : reference.backward_events)
    if (name.starts_with(kEvaluateFunction)) evaluate_functions += count;
  ASSERT_GT(evaluate_functions, 0U) << "torch recorded no backward pass";
  EXPECT_GE(backward.value(), kMinimumBackwardRecall);
  EXPECT_GE(backward_precision.value(), kMinimumBackwardRecall);

  const Recall flows = recall_of(recorded.flows, reference.flows);
  std::cout << environment.description << ": fwdbwd flow recall " << flows.value() << " (" << flows.matched << "/"
            << flows.expected << ")\nlargest shortfalls:\n"
            << describe_missing(recorded.flows, reference.flows);
  ::testing::Test::RecordProperty("flow_recall", std::to_string(flows.value()));
  ASSERT_GT(flows.expected, 0U) << "torch linked no forward op to a backward node";
  EXPECT_GE(flows.value(), kMinimumFlowRecall);
}

class ShapesEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_tracing_capabilities())
      GTEST_SKIP() << "\n*** SKIPPED: attaching uprobes needs root (CAP_SYS_ADMIN, or CAP_BPF + "
                      "CAP_PERFMON); shapes and backward nodes are NOT tested ***";
  }
  ScratchDirectory scratch_;
};

TEST_F(ShapesEndToEndTest, MatchTorchProfilerOnTorch113) {
  expect_shapes_and_backward_match_torch(host_workload(scratch_.path()));
}

// torch 2.6 (trixie) and torch 2.14 (sid, GCC 16), each in its chroot.
class RootShapesTest : public ShapesEndToEndTest, public ::testing::WithParamInterface<TorchRoot> {};

TEST_P(RootShapesTest, MatchTorchProfiler) {
  const auto root = RootWorkload::make(GetParam());
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "the torch 2.x TensorImpl layout");
  expect_shapes_and_backward_match_torch(root->environment());
}

INSTANTIATE_TEST_SUITE_P(Torch2, RootShapesTest, ::testing::Values(TorchRoot::kTrixie, TorchRoot::kSid),
                         [](const auto& info) { return suite_name(info.param); });

TEST_F(ShapesEndToEndTest, NoShapesLeavesInputsOut) {
  const fs::path trace_path = scratch_.path() / "no_shapes.pt.trace.json";
  const std::string stderr_text = record_workload_with_tprof(host_workload(scratch_.path()),
                                                             {"--steps", "1"}, trace_path, {"--no-shapes"});
  EXPECT_EQ(stderr_text.find("with shapes"), std::string::npos) << stderr_text;
  const TraceJson trace = load_trace(trace_path);
  EXPECT_EQ(trace.at("record_shapes"), 0);
  size_t ops = 0;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("cat", "") != "cpu_op") continue;
    ++ops;
    EXPECT_FALSE(event.at("args").contains("Input Dims")) << event.at("name");
  }
  EXPECT_GT(ops, 0U);
  EXPECT_GT(read_tprof_trace(trace_path).backward_events.size(), 0U) << "backward nodes are recorded all the same";
}

}  // namespace
}  // namespace tprof::test
