// torch.compile seen from outside (torch 2.6 and 2.14 roots): every call of a compiled graph
// is a "Torch-Compiled Region: F/N" cpu_op, as torch's profiler records them, and the
// end-of-run compile summary gives dynamo's profiler's graphs, graph calls and captured/total
// ops, and names the recompiles with the line that first called each graph, and the graph break.
// tests/workloads/compiled_function.py is the target: one function with a graph break,
// compiled three times. tests/workloads/inductor_function.py is the target of inductor's C++
// kernels, in the roots with inductor's toolchain.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kRegionPrefix = "Torch-Compiled Region: ";
constexpr const char* kCacheLookup = "TorchDynamo Cache Lookup";

class CompileTest : public ::testing::TestWithParam<TorchRoot> {};

std::unique_ptr<RootWorkload> compiled_workload(TorchRoot root) {
  return RootWorkload::make(root, workload_script("compiled_function.py"));
}

// tests/workloads/inductor_function.py, in the root with inductor's toolchain; nullptr when it
// could not be made.
std::unique_ptr<RootWorkload> inductor_workload(TorchRoot root) {
  return RootWorkload::make(root, workload_script("inductor_function.py"), RootTools::kInductor);
}

std::string missing_inductor_root_message(TorchRoot root, const std::string& what) {
  return "\n*** SKIPPED LOUDLY: scripts/make-inductor-root.sh " + suite_name(root) +
         " could not add inductor's toolchain; " + what + " NOT tested ***";
}

struct Recorded {
  bool succeeded = false;
  std::string console;
};

// `tprof record` of the workload from its first op, with no Execution Trace.
Recorded record_from_first_op(const WorkloadEnvironment& environment, const std::vector<std::string>& workload_arguments,
                              const fs::path& trace_path) {
  std::vector<std::string> argv = {testing::tprof_binary(), "record", "-o", trace_path.string(), "--no-et", "--"};
  for (const std::string& word : workload_command(environment, workload_arguments)) argv.push_back(word);
  ChildProcess tprof({.argv = argv, .pipe_stderr = true});
  tprof.stderr_lines().read_to_end(600s);
  const auto status = tprof.wait_for_exit(60s);
  return {status && status->exited_normally && status->code == 0, tprof.stderr_lines().transcript()};
}

// The cpu_op events of a Chrome trace (tprof's or torch's) whose name `counted` accepts, by name.
template <typename Predicate>
std::map<std::string, int> cpu_ops(const fs::path& trace_path, Predicate counted) {
  const nlohmann::json trace = nlohmann::json::parse(read_trace_text(trace_path));
  std::map<std::string, int> counts;
  for (const auto& event : trace.at("traceEvents")) {
    const std::string name = event.value("name", "");
    if (event.value("cat", "") == "cpu_op" && counted(name)) ++counts[name];
  }
  return counts;
}

// The ranges dynamo opens, by name.
std::map<std::string, int> dynamo_ranges(const fs::path& trace_path) {
  return cpu_ops(trace_path, [](const std::string& name) { return name.starts_with(kRegionPrefix) || name == kCacheLookup; });
}

std::map<std::string, int> aten_ops(const fs::path& trace_path) {
  return cpu_ops(trace_path, [](const std::string& name) { return name.starts_with("aten::"); });
}

// Inductor's kernel calls, by name.
std::map<std::string, int> kernel_calls(const fs::path& trace_path) {
  return cpu_ops(trace_path, [](const std::string& name) { return name.starts_with("cpp_fused_"); });
}

struct SummaryFigures {
  int graphs = -1, frames = -1, calls = -1, captured = -1, total = -1;
};

// tprof's "torch.compile: 6 graphs (of 2 frames), 12 graph calls; 24/114 ops ..." line.
SummaryFigures summary_figures(const std::string& console) {
  static const std::regex line(
      R"(torch\.compile: (\d+) graphs \(of (\d+) frames\), (\d+) graph calls; (\d+)/(\d+) ops)");
  std::smatch match;
  SummaryFigures figures;
  if (!std::regex_search(console, match, line)) return figures;
  figures = {std::stoi(match[1]), std::stoi(match[2]), std::stoi(match[3]), std::stoi(match[4]), std::stoi(match[5])};
  return figures;
}

// tprof's whole "torch.compile: ..." line, for the log.
std::string summary_line(const std::string& console) {
  const size_t start = console.find("torch.compile: ");
  return start == std::string::npos ? std::string() : console.substr(start, console.find('\n', start) - start);
}

// What `tprof report --compile TRACE` prints.
std::string report_compile(const fs::path& trace) {
  ChildProcess report({.argv = {testing::tprof_binary(), "report", "--compile", trace.string()}, .pipe_stdout = true});
  report.stdout_lines().read_to_end(120s);
  const auto status = report.wait_for_exit(30s);
  EXPECT_TRUE(status && status->exited_normally && status->code == 0) << trace;
  return report.stdout_lines().transcript();
}

// The line of compiled_function.py that ends with `marker`, 1-based; 0 if none does.
int line_marked(const fs::path& script, const std::string& marker) {
  std::ifstream in(script);
  std::string text;
  for (int number = 1; std::getline(in, text); ++number)
    if (text.ends_with(marker)) return number;
  return 0;
}

// Attached after the warm-up compiled everything: the measured steps' regions against torch's
// own profile of the same steps, and the summary against the seed's figures from that profile.
TEST_P(CompileTest, RegionsAndCapturedOpsMatchTorchsProfiler) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; compiled regions are NOT tested ***";
  const auto root = compiled_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "torch.compile's regions");
  const WorkloadEnvironment& environment = root->environment();
  const fs::path trace_path = environment.scratch_for_us / "compiled.pt.trace.json";
  const std::string console = record_workload_with_tprof(environment, {"--steps", "3"}, trace_path, {"--no-et"});
  run_workload(environment, {"--steps", "3", "--compile-reference-out",
                             (environment.scratch_for_target / "reference.json").string()});
  std::ifstream in(environment.scratch_for_us / "reference.json");
  const nlohmann::json reference = nlohmann::json::parse(in);

  std::map<std::string, int> expected = reference.at("regions").get<std::map<std::string, int>>();
  // torch 2.14 opens its cache lookup range from a site that names no symbol
  // (symbolizer/dynamo/compiled_region_sites.h): tprof records it on 2.6 only.
  if (GetParam() == TorchRoot::kSid) expected.erase(kCacheLookup);
  int expected_calls = 0;
  for (const auto& [name, calls] : expected) expected_calls += name.starts_with(kRegionPrefix) ? calls : 0;
  ASSERT_GT(expected_calls, 0) << "torch's profile shows no compiled region: the reference is broken";
  EXPECT_EQ(dynamo_ranges(trace_path), expected) << console;
  EXPECT_TRUE(validate_trace_file(trace_path).empty());

  const SummaryFigures figures = summary_figures(console);
  std::cout << environment.description << ": tprof " << figures.graphs << " graphs, " << figures.calls
            << " graph calls, " << figures.captured << "/" << figures.total << " ops; torch's profile "
            << expected_calls << " graph calls, " << reference.at("captured_ops") << "/" << reference.at("total_ops")
            << " ops\n";
  EXPECT_EQ(figures.calls, expected_calls) << console;
  EXPECT_EQ(figures.graphs, static_cast<int>(expected.size() - expected.count(kCacheLookup))) << console;
  EXPECT_LE(std::abs(figures.captured - reference.at("captured_ops").get<int>()), 1) << console;
  EXPECT_LE(std::abs(figures.total - reference.at("total_ops").get<int>()), 1) << console;

  // `tprof report --compile` reads the same figures off torch's own trace and off tprof's.
  const SummaryFigures from_torch = summary_figures(report_compile(environment.scratch_for_us / "reference.json.trace.json"));
  const SummaryFigures from_tprof = summary_figures(report_compile(trace_path));
  std::cout << environment.description << ": tprof report --compile: torch's trace " << from_torch.graphs << " graphs, "
            << from_torch.calls << " graph calls, " << from_torch.captured << "/" << from_torch.total
            << " ops; tprof's trace " << from_tprof.graphs << " graphs, " << from_tprof.calls << " graph calls, "
            << from_tprof.captured << "/" << from_tprof.total << " ops\n";
  EXPECT_EQ(from_torch.calls, expected_calls);
  EXPECT_EQ(from_torch.graphs, figures.graphs);
  EXPECT_EQ(from_tprof.calls, expected_calls);
  EXPECT_EQ(from_tprof.graphs, figures.graphs);
  EXPECT_LE(std::abs(from_tprof.captured - from_torch.captured), 1);
  EXPECT_LE(std::abs(from_tprof.total - from_torch.total), 1);
}

// Dynamo's own profiler (torch._dynamo.profiler, the seed of tprof's compile summary) runs in the
// target over the very steps tprof records: the summary, and `tprof report --compile` on tprof's
// trace, give its graphs and graph calls as it prints them, and its captured/total ops as its loop
// counts them on torch 2.x (compiled_function.py's dynamo_profiler_report says why it prints 0
// captured ops there).
TEST_P(CompileTest, SummaryEqualsDynamoProfilerOnTheSameSteps) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; the compile summary is NOT tested ***";
  const auto root = compiled_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "dynamo's profiler");
  const WorkloadEnvironment& environment = root->environment();
  const fs::path trace_path = environment.scratch_for_us / "dynamo_profiled.pt.trace.json";
  const std::string console = record_workload_with_tprof(
      environment,
      {"--steps", "3", "--dynamo-profiler-out", (environment.scratch_for_target / "dynamo_profiler.json").string()},
      trace_path, {"--no-et"});
  std::ifstream in(environment.scratch_for_us / "dynamo_profiler.json");
  const nlohmann::json dynamo = nlohmann::json::parse(in);
  const int graphs = dynamo.at("graphs"), calls = dynamo.at("graph_calls");
  const int captured = dynamo.at("captured_ops"), total = dynamo.at("total_ops");
  ASSERT_GT(calls, 0) << "dynamo's profiler saw no graph call: the workload is broken";
  ASSERT_GT(total - captured, 0) << "the workload ran no eager op: captured/total would test nothing";

  const SummaryFigures figures = summary_figures(console);
  const SummaryFigures from_trace = summary_figures(report_compile(trace_path));
  std::cout << environment.description << ": dynamo's profiler printed '" << dynamo.at("printed").get<std::string>()
            << "', its ops on 2.x " << captured << "/" << total << " (time inside regions "
            << dynamo.at("captured_time_share").get<double>() * 100 << "%); tprof " << figures.graphs << " graphs, "
            << figures.calls << " graph calls, " << figures.captured << "/" << figures.total
            << " ops; tprof report --compile " << from_trace.graphs << " graphs, " << from_trace.calls
            << " graph calls, " << from_trace.captured << "/" << from_trace.total << " ops\n"
            << summary_line(console) << "\n";
  for (const SummaryFigures& tprofs : {figures, from_trace}) {
    EXPECT_EQ(tprofs.graphs, graphs) << console;
    EXPECT_EQ(tprofs.calls, calls) << console;
    EXPECT_LE(std::abs(tprofs.captured - captured), 1) << console;
    EXPECT_LE(std::abs(tprofs.total - total), 1) << console;
  }
  EXPECT_TRUE(validate_trace_file(trace_path).empty());
}

// Under aot_eager, AOTAutograd's graphs call every op as torch.ops.aten.<op>.<overload>, through
// the boxed dispatcher, which at::_ops::<op>::call never sees: tprof's probe where those calls
// pass libtorch_python must give the same ops as torch's profiler, and the captured ops with them.
TEST_P(CompileTest, BoxedOpsOfAotEagerGraphsMatchTorchsProfiler) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; boxed ops are NOT tested ***";
  const auto root = compiled_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "boxed ops");
  const WorkloadEnvironment& environment = root->environment();
  const fs::path trace_path = environment.scratch_for_us / "aot_eager.pt.trace.json";
  const std::string console = record_workload_with_tprof(environment, {"--steps", "3", "--backend", "aot_eager"},
                                                         trace_path, {"--no-et"});
  run_workload(environment, {"--steps", "3", "--backend", "aot_eager", "--compile-reference-out",
                             (environment.scratch_for_target / "reference.json").string()});
  const nlohmann::json reference = nlohmann::json::parse(std::ifstream(environment.scratch_for_us / "reference.json"));

  const std::map<std::string, int> ours = aten_ops(trace_path);
  const std::map<std::string, int> torchs = aten_ops(environment.scratch_for_us / "reference.json.trace.json");
  std::cout << environment.description << ": aten:: ops (tprof / torch's profile):";
  for (const auto& [name, calls] : torchs) std::cout << " " << name << " " << (ours.contains(name) ? ours.at(name) : 0) << "/" << calls;
  std::cout << "\n";
  EXPECT_EQ(ours, torchs) << console;
  EXPECT_TRUE(validate_trace_file(trace_path).empty());

  const SummaryFigures figures = summary_figures(console);
  std::cout << environment.description << ": tprof " << figures.captured << "/" << figures.total
            << " ops captured; torch's profile " << reference.at("captured_ops") << "/" << reference.at("total_ops") << "\n";
  EXPECT_GT(figures.captured, 0) << console;
  EXPECT_LE(std::abs(figures.captured - reference.at("captured_ops").get<int>()), 1) << console;
  EXPECT_LE(std::abs(figures.total - reference.at("total_ops").get<int>()), 1) << console;
}

// --skip-ops leaves an op out whichever way it is called: aot_eager's graphs call sin and cos
// only through torch.ops, so the trace must hold no aten::sin and still the boxed aten::cos.
TEST_P(CompileTest, SkipOpsLeavesOutBoxedCallsToo) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; boxed ops are NOT tested ***";
  const auto root = compiled_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "boxed ops");
  const WorkloadEnvironment& environment = root->environment();
  const fs::path trace_path = environment.scratch_for_us / "skip_sin.pt.trace.json";
  const std::string console = record_workload_with_tprof(environment, {"--steps", "3", "--backend", "aot_eager"},
                                                         trace_path, {"--no-et", "--skip-ops", "^aten::sin$"});
  const std::map<std::string, int> ours = aten_ops(trace_path);
  EXPECT_FALSE(ours.contains("aten::sin")) << ours.at("aten::sin") << " aten::sin calls\n" << console;
  EXPECT_TRUE(ours.contains("aten::cos")) << console;
}

// --max-overhead puts the boxed dispatch's probes in and out with the ops' for each window: a
// boxed call in flight when a window closes is closed there, like an op. The trace must stay
// valid, and the windows hold the boxed calls.
TEST_P(CompileTest, BoxedOpsComeAndGoWithMaxOverheadWindows) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; boxed ops are NOT tested ***";
  const auto root = compiled_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "boxed ops");
  const WorkloadEnvironment& environment = root->environment();
  const fs::path trace_path = environment.scratch_for_us / "windows.pt.trace.json";
  const std::string console =
      record_workload_with_tprof(environment, {"--steps", "6000", "--backend", "aot_eager", "--optimizer-step"},
                                 trace_path, {"--no-et", "--max-overhead", "20%"});
  const std::regex windows(R"(ops in windows \(--max-overhead 20%\): (\d+) windows)");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(console, match, windows)) << console;
  std::cout << environment.description << ": " << match[0] << "; aten::sin " << aten_ops(trace_path)["aten::sin"] << "\n";
  EXPECT_GE(std::stoi(match[1]), 2) << console;
  EXPECT_GT(aten_ops(trace_path)["aten::sin"], 0) << console;
  const std::vector<std::string> violations = validate_trace_file(trace_path);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, the first: " << violations.front();
}

// `tprof record` sees the compiles too: three graphs of each frame, each first called from its
// line of the step, the recompiles named with the guard that failed, the graph break at its
// line, and the six compiles
// timed by the wait counter torch starts around each (torch 2.14 opens no `(dynamo_timed)`
// range without its own profiler), their ops counted nowhere: the function's sin runs only in
// its graphs and in compile work, so no eager aten::sin may be left.
TEST_P(CompileTest, RecordNamesEachGraphsFirstCallAndTheRecompiles) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; compiled regions are NOT tested ***";
  const auto root = compiled_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_root_message(GetParam(), "torch.compile's regions");
  const WorkloadEnvironment& environment = root->environment();
  const fs::path trace_path = environment.scratch_for_us / "recorded.pt.trace.json";
  const auto [succeeded, console] = record_from_first_op(environment, {"--steps", "2", "--trigger", "none"}, trace_path);
  ASSERT_TRUE(succeeded) << console;

  const fs::path script = environment.scratch_for_us / "compiled_function.py";
  const std::string called_from = environment.script.string() + "(";
  const int compiles = line_marked(script, "# compiles");
  const int requires_grad = line_marked(script, "# recompiles: requires_grad");
  const int shape = line_marked(script, "# recompiles: shape");
  const int graph_break = line_marked(script, "# breaks the graph");
  ASSERT_TRUE(compiles > 0 && requires_grad > 0 && shape > 0 && graph_break > 0) << "markers missing from " << script;
  const SummaryFigures figures = summary_figures(console);
  EXPECT_EQ(figures.graphs, 6) << console;
  EXPECT_EQ(figures.frames, 2) << console;
  for (const auto& [graph, line] : {std::pair{"0/0", compiles}, {"0/1", requires_grad}, {"0/2", shape}}) {
    const std::regex first_call("graph " + std::string(graph) + R"(: \d+ calls, [0-9.]+ ms, first called from )" +
                                std::regex_replace(called_from, std::regex(R"([.()/])"), R"(\$&)") +
                                std::to_string(line) + R"(\))");
    EXPECT_TRUE(std::regex_search(console, first_call)) << graph << " at line " << line << ":\n" << console;
  }
  EXPECT_NE(console.find("recompiled: frame 0 has 3 graphs (2 recompiles), first called from " + called_from +
                         std::to_string(compiles) + ")"),
            std::string::npos)
      << console;
  EXPECT_NE(console.find("recompiled: frame 1 has 3 graphs (2 recompiles)"), std::string::npos) << console;
  EXPECT_NE(console.find("graph break: in twice_sine_then_cosine at " + called_from + std::to_string(graph_break) +
                         ")"),
            std::string::npos)
      << console;
  EXPECT_TRUE(std::regex_search(console, std::regex(R"(; [0-9.]+ ms compiling \(6 compiles\))"))) << console;
  // Each of the four recompiles, with the guard of the frame's newest graph that failed (2.6
  // names the tensor L['x'], 2.14 x): the step's tensors change requires_grad, then shape, and
  // dynamo checks requires_grad first. A first compile has no reason.
  const std::regex reason(R"(\n[^\n]*    ([01]/[01]): tensor '(L\['[xy]'\]|[xy])' requires_grad mismatch\. expected requires_grad=([01]))");
  std::vector<std::string> reasons;
  for (auto it = std::sregex_iterator(console.begin(), console.end(), reason); it != std::sregex_iterator(); ++it)
    reasons.push_back((*it)[1].str() + "=" + (*it)[3].str());
  EXPECT_EQ(reasons, (std::vector<std::string>{"0/0=0", "0/1=1", "1/0=0", "1/1=1"})) << console;
  EXPECT_NE(read_trace_text(trace_path).find("\"Recompile reason\": \"0/1: tensor "), std::string::npos);
  EXPECT_EQ(console.find("    aten::sin x"), std::string::npos) << "compile work counted as eager ops:\n" << console;
  const std::vector<std::string> violations = validate_trace_file(trace_path);  // the counters' ranges nest
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, the first: " << violations.front();
}

struct TraceEvent {
  uint64_t tid = 0;
  double start = 0, end = 0;
  std::string name;
};

// Attached after the warm-up compiled the graphs with inductor: every call of a fused C++ kernel
// in the measured steps, by name, against torch's own profile of the same steps with kernel
// profiling built in (tests/workloads/inductor_function.py), and each inside its generated
// module's `call` frame, with its source file.
TEST_P(CompileTest, InductorKernelCallsMatchTorchsProfilerAndNestInTheirCallFrame) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; inductor's kernels are NOT tested ***";
  const auto root = inductor_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_inductor_root_message(GetParam(), "inductor's kernels are");
  const WorkloadEnvironment& environment = root->environment();
  const fs::path trace_path = environment.scratch_for_us / "inductor.pt.trace.json";
  const std::string console = record_workload_with_tprof(environment, {"--steps", "3"}, trace_path, {"--no-et"});
  run_workload(environment, {"--steps", "3", "--kernel-reference-out",
                             (environment.scratch_for_target / "kernels.json").string()});
  std::ifstream in(environment.scratch_for_us / "kernels.json");
  const auto expected = nlohmann::json::parse(in).at("kernels").get<std::map<std::string, int>>();
  int expected_calls = 0;
  for (const auto& [name, calls] : expected) expected_calls += calls;
  ASSERT_GT(expected_calls, 0) << "torch's profile shows no inductor kernel: the reference is broken";

  const nlohmann::json trace = nlohmann::json::parse(read_trace_text(trace_path));
  std::map<std::string, int> kernels;
  std::vector<TraceEvent> kernel_events, call_frames;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("ph", "") != "X") continue;
    const std::string name = event.value("name", "");
    const TraceEvent span{event.value("tid", uint64_t{0}), event.at("ts").get<double>(),
                          event.at("ts").get<double>() + event.at("dur").get<double>(), name};
    if (event.value("cat", "") == "cpu_op" && name.starts_with("cpp_fused_")) {
      ++kernels[name];
      kernel_events.push_back(span);
      const std::string source = event.at("args").value("Kernel file", "");
      EXPECT_TRUE(source.ends_with(".cpp") && fs::exists(source)) << name << ": " << source;
    } else if (event.value("cat", "") == "python_function" && name.find("/inductor-cache/") != std::string::npos &&
               name.ends_with("): call")) {
      call_frames.push_back(span);
    }
  }
  std::cout << environment.description << ": tprof " << kernel_events.size() << " kernel calls of " << kernels.size()
            << " kernels; torch's profile " << expected_calls << " of " << expected.size() << "\n";
  EXPECT_EQ(kernels, expected) << console;
  EXPECT_NE(console.find("probing 6 new inductor C++ kernels"), std::string::npos) << console;
  // The compile summary counts them, at the end of the run and from either trace.
  const std::regex kernel_line(R"(inductor C\+\+ kernels: (\d+) calls of (\d+) kernels)");
  std::smatch match;
  ASSERT_TRUE(std::regex_search(console, match, kernel_line)) << console;
  EXPECT_EQ(std::stoi(match[1]), expected_calls) << console;
  EXPECT_EQ(std::stoul(match[2]), expected.size()) << console;
  for (const fs::path& trace : {trace_path, environment.scratch_for_us / "kernels.json.trace.json"}) {
    const std::string report = report_compile(trace);
    ASSERT_TRUE(std::regex_search(report, match, kernel_line)) << trace << ":\n" << report;
    EXPECT_EQ(std::stoi(match[1]), expected_calls) << trace << ":\n" << report;
  }
  // Python spans are timed from the stacks the probes saw: a frame and the first kernel it calls
  // begin at the same instant, and the trace rounds both to the nanosecond.
  for (const TraceEvent& kernel : kernel_events) {
    const bool nested = std::any_of(call_frames.begin(), call_frames.end(), [&](const TraceEvent& frame) {
      return frame.tid == kernel.tid && frame.start <= kernel.start + 1e-3 && kernel.end <= frame.end + 1e-3;
    });
    EXPECT_TRUE(nested) << kernel.name << " at " << kernel.start << " is in no generated module's call frame";
  }
  EXPECT_TRUE(validate_trace_file(trace_path).empty());
}

// Under `tprof record` the target is held at each dlopen while tprof looks for new kernels, so
// that a kernel is probed before its first call: from the first step, compiles included, the
// kernel calls equal torch's own profile of the same steps, with no warm-up.
TEST_P(CompileTest, RecordProbesEachInductorKernelBeforeItsFirstCall) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; inductor's kernels are NOT tested ***";
  const auto root = inductor_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_inductor_root_message(GetParam(), "inductor's kernels are");
  const WorkloadEnvironment& environment = root->environment();
  const fs::path trace_path = environment.scratch_for_us / "inductor-recorded.pt.trace.json";
  const auto [succeeded, console] =
      record_from_first_op(environment, {"--steps", "4", "--warmup", "0", "--trigger", "none"}, trace_path);
  ASSERT_TRUE(succeeded) << console;
  run_workload(environment, {"--steps", "4", "--warmup", "0", "--kernel-reference-out",
                             (environment.scratch_for_target / "recorded-kernels.json").string()});
  std::ifstream in(environment.scratch_for_us / "recorded-kernels.json");
  const auto expected = nlohmann::json::parse(in).at("kernels").get<std::map<std::string, int>>();
  ASSERT_FALSE(expected.empty()) << "torch's profile shows no inductor kernel: the reference is broken";
  const std::map<std::string, int> kernels = kernel_calls(trace_path);
  int recorded = 0, expected_calls = 0;
  for (const auto& [name, calls] : kernels) recorded += calls;
  for (const auto& [name, calls] : expected) expected_calls += calls;
  std::cout << environment.description << ": tprof record " << recorded << " kernel calls of " << kernels.size()
            << " kernels; torch's profile " << expected_calls << " of " << expected.size() << "\n";
  EXPECT_EQ(kernels, expected) << console;
  EXPECT_TRUE(validate_trace_file(trace_path).empty());
}

// --ops and --skip-ops select inductor's kernels by name as they select ops. With --skip-ops
// '^cpp_fused_' none is probed (the console names the six it left out) and the trace holds no
// kernel call, while the ops the generated code calls (aten::mm) and the compiled regions are
// still there. With --ops '^cpp_fused_' no ATen op is probed at all (which once failed the
// attach: a link of no sites) and the kernels are.
TEST_P(CompileTest, OpsAndSkipOpsSelectInductorKernelsByName) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; kernel selection is NOT tested ***";
  const auto root = inductor_workload(GetParam());
  if (!root) GTEST_SKIP() << missing_inductor_root_message(GetParam(), "kernel selection is");
  const WorkloadEnvironment& environment = root->environment();
  const auto has_region = [](const std::map<std::string, int>& ranges) {
    return std::any_of(ranges.begin(), ranges.end(), [](const auto& range) { return range.first.starts_with(kRegionPrefix); });
  };

  const fs::path skipped = environment.scratch_for_us / "no-kernels.pt.trace.json";
  std::string console = record_workload_with_tprof(environment, {"--steps", "3"}, skipped,
                                                   {"--no-et", "--skip-ops", "^cpp_fused_"});
  EXPECT_NE(console.find("leaving out 6 new inductor C++ kernels (cpp_fused_"), std::string::npos) << console;
  EXPECT_EQ(console.find("probing 6 new inductor"), std::string::npos) << console;
  const auto left_out = kernel_calls(skipped);
  EXPECT_TRUE(left_out.empty()) << left_out.size() << " kernels probed, among them " << left_out.begin()->first;
  EXPECT_GT(aten_ops(skipped)["aten::mm"], 0) << console;
  EXPECT_TRUE(has_region(dynamo_ranges(skipped))) << console;
  EXPECT_TRUE(validate_trace_file(skipped).empty());

  const fs::path only = environment.scratch_for_us / "only-kernels.pt.trace.json";
  console = record_workload_with_tprof(environment, {"--steps", "3"}, only, {"--no-et", "--ops", "^cpp_fused_"});
  EXPECT_NE(console.find("probing 6 new inductor C++ kernels (cpp_fused_"), std::string::npos) << console;
  EXPECT_EQ(kernel_calls(only).size(), 3u) << console;
  const auto ops = aten_ops(only);
  EXPECT_TRUE(ops.empty()) << ops.size() << " ATen ops probed, among them " << ops.begin()->first;
  EXPECT_TRUE(has_region(dynamo_ranges(only))) << console;
  EXPECT_TRUE(validate_trace_file(only).empty());
}

INSTANTIATE_TEST_SUITE_P(Torch2, CompileTest, ::testing::Values(TorchRoot::kTrixie, TorchRoot::kSid),
                         [](const auto& info) { return suite_name(info.param); });

}  // namespace
}  // namespace tprof::test
