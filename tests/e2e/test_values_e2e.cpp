// End to end: the Scalar values tprof writes in "Concrete Inputs" are the ones the target passed
// (tests/workloads/scalar_values.py calls ops with known Scalars), on torch 1.13 and torch 2.6;
// and on torch 2.6 every non-tensor input value of the training loop, in the Chrome trace and
// the Execution Trace, agrees with what torch's own profiler and ExecutionTraceObserver record
// for the same steps (tests/e2e/scripts/compare_values.py), and so do the ranges besides ATen
// ops (autograd's, and C++ scopes such as detach). A wrong value is worse than none:
// an unknown one is written "" (or "<Unknown>" in the ET), never a guess.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
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

TEST(ScalarValues, AreThePassedValuesOnTorch26InChroot) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; Scalar values are NOT tested ***";
  const auto trixie = TrixieWorkload::make(workload_script("scalar_values.py"));
  if (!trixie)
    GTEST_SKIP() << "\n**********\n*** SKIPPED LOUDLY: scripts/make-trixie-root.sh could not provide the torch 2.6 "
                    "root; Scalar values on torch 2.6 are NOT tested\n**********";
  ScratchDirectory scratch;
  expect_known_scalars(trixie->environment(), scratch.path() / "values.pt.trace.json");
}

// The bar: no value contradicts torch's, and at least 95% of the values torch gives are
// present, in each of the two files. The comparison's table goes to the test log.
TEST(ValueAgreement, EveryNonTensorInputAgreesWithTorchsProfilerOnTorch26InChroot) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; value agreement is NOT tested ***";
  const auto trixie = TrixieWorkload::make();
  if (!trixie)
    GTEST_SKIP() << "\n**********\n*** SKIPPED LOUDLY: scripts/make-trixie-root.sh could not provide the torch 2.6 "
                    "root; values are NOT compared with torch's\n**********";
  constexpr int kSteps = 3;
  const WorkloadEnvironment& environment = trixie->environment();
  run_workload(environment, {"--steps", std::to_string(kSteps), "--kineto-trace-out",
                             (environment.scratch_for_target / "torch.pt.trace.json").string(), "--execution-trace-out",
                             (environment.scratch_for_target / "torch.et.json").string()});
  const fs::path trace_path = environment.scratch_for_us / "tprof.pt.trace.json";
  record_workload_with_tprof(environment, {"--steps", std::to_string(kSteps)}, trace_path);
  const CommandResult comparison = run_command(
      {"/usr/bin/python3", testing::source_dir() + "/tests/e2e/scripts/compare_values.py", "--torch-trace",
       (environment.scratch_for_us / "torch.pt.trace.json").string(), "--torch-et",
       (environment.scratch_for_us / "torch.et.json").string(), "--tprof-trace", trace_path.string(), "--tprof-et",
       (environment.scratch_for_us / "execution_trace" / "tprof.et.json").string()},
      std::chrono::minutes(2));
  std::string table;
  for (const std::string& line : comparison.stdout_lines) table += line + "\n";
  std::cout << table;
  ASSERT_TRUE(comparison.status.has_value()) << "compare_values.py did not finish";
  EXPECT_TRUE(comparison.status->succeeded()) << comparison.status->describe() << "\n" << table;

  // The same traces hold the same ranges besides ATen ops: the autograd engine's and the
  // named C++ scopes (SGD's momentum buffers go through autograd's detach, 10 a step).
  const auto non_aten_ranges = [](const fs::path& path) {
    NameCounts counts = complete_event_name_counts(load_trace(path), "cpu_op");
    std::erase_if(counts, [](const auto& entry) { return entry.first.starts_with("aten::"); });
    return counts;
  };
  const NameCounts torch_ranges = non_aten_ranges(environment.scratch_for_us / "torch.pt.trace.json");
  EXPECT_EQ(non_aten_ranges(trace_path), torch_ranges);
  EXPECT_EQ(torch_ranges.count("detach") ? torch_ranges.at("detach") : 0, 10u * kSteps);
}

}  // namespace
}  // namespace tprof::test
