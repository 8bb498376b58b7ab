// The target-harm suite: tprof, fully tracing (ops, shapes, Python stacks, autograd nodes,
// annotations), attaches to real torch processes that throw C++ exceptions through the frames
// it probes (tests/workloads/harm_workloads.py). Each target must exit 0 with the same counts
// it prints untraced, and each trace must be valid and hold >= 99% of the aten:: ops torch's
// own profiler records over the same steps, the ops ended by an exception included, flagged
// "tprof: unwound". A uretprobe on any of these frames aborts the target (std::terminate);
// these tests are what keeps that from coming back.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::fail_harness;

constexpr double kMinimumRecall = 0.99;
constexpr int kAttachCycles = 20;
constexpr int kKilledAttaches = 5;
// The engine's range around a Python autograd.Function's node (PyNode lives in libtorch_python,
// whose apply() is not probed, so only evaluate_function shows it).
constexpr const char* kFailingNodeRange = "autograd::engine::evaluate_function: torch::autograd::Node";
constexpr auto kStartTimeout = 180s;
constexpr auto kRunTimeout = 300s;
constexpr std::optional<TorchRoot> kHost;  // Debian's torch 1.13

struct HarmCase {
  std::string scenario;  // harm_workloads.py --scenario
  // A torch root (2.6 in trixie's, 2.14 in sid's); none: Debian's torch 1.13 on the host.
  std::optional<TorchRoot> root;
  int steps = 10;
  std::string unwound_op;  // the op the scenario's exception unwinds
  int unwound_per_step = 0;  // how many of its calls each step ends by an exception
  RootTools tools = RootTools::kTorch;  // kInductor: the trixie root with inductor's C++ toolchain
};

void PrintTo(const HarmCase& harm_case, std::ostream* out) {
  *out << harm_case.scenario << " on " << (harm_case.root ? describe(*harm_case.root) : "torch 1.13 (host)");
}

// What the workload printed after its steps: {"steps", "caught", "expected", "checksum"}.
nlohmann::json read_counts(ChildProcess& workload) {
  const auto line = workload.stdout_lines().read_line_containing("COUNTS ", kRunTimeout);
  if (!line) fail_harness("the workload never printed COUNTS:\n" + workload.stdout_lines().transcript());
  return nlohmann::json::parse(line->substr(line->find(' ') + 1));
}

// The workload, parked at READY.
class HarmWorkload {
 public:
  HarmWorkload(const WorkloadEnvironment& environment, const std::vector<std::string>& arguments)
      : process_({.argv = workload_command(environment, arguments), .pipe_stdin = true, .pipe_stdout = true}) {
    const auto ready = process_.stdout_lines().read_line_containing("READY", kStartTimeout);
    if (!ready) fail_harness("workload never printed READY:\n" + process_.stdout_lines().transcript());
    pid_ = ready->substr(ready->find(' ') + 1);
  }

  const std::string& pid() const { return pid_; }
  ChildProcess& process() { return process_; }

  // Lets the workload exit; it must exit 0 (no abort, no signal).
  void expect_clean_exit() {
    process_.close_stdin();
    const auto status = process_.wait_for_exit(kRunTimeout);
    ASSERT_TRUE(status.has_value()) << "the target did not exit";
    EXPECT_TRUE(status->succeeded()) << "the target " << status->describe() << "; stdout:\n"
                                     << process_.stdout_lines().transcript();
  }

 private:
  ChildProcess process_;
  std::string pid_;
};

// tprof attached with everything on, until stopped.
class AttachedTprof {
 public:
  AttachedTprof(const std::string& pid, const fs::path& trace, std::vector<std::string> extra = {})
      : process_({.argv = command(pid, trace, std::move(extra)), .pipe_stderr = true}) {
    if (!process_.stderr_lines().read_line_containing("attached", kStartTimeout))
      fail_harness("tprof never printed 'attached':\n" + process_.stderr_lines().transcript());
  }

  std::string console() { return process_.stderr_lines().transcript(); }

  // SIGINT (unless it stops by itself), then tprof must exit 0.
  void stop(bool interrupt = true) {
    if (interrupt) process_.send_signal(SIGINT);
    process_.stderr_lines().read_to_end(kRunTimeout);
    const auto status = process_.wait_for_exit(kRunTimeout);
    ASSERT_TRUE(status && status->succeeded())
        << "tprof " << (status ? status->describe() : "did not exit") << ":\n"
        << process_.stderr_lines().transcript();
  }

 private:
  static std::vector<std::string> command(const std::string& pid, const fs::path& trace,
                                          std::vector<std::string> extra) {
    std::vector<std::string> argv = {testing::tprof_binary(), "attach", pid, "--output", trace.string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }
  ChildProcess process_;
};

struct OpCensus {
  NameCounts all;
  NameCounts unwound;
  static size_t of(const NameCounts& counts, const std::string& name) {
    const auto found = counts.find(name);
    return found == counts.end() ? 0 : found->second;
  }
};

OpCensus census_of(const TraceJson& trace) {
  OpCensus census;
  for (const auto& event : trace["traceEvents"]) {
    if (event.value("cat", "") != "cpu_op" || event.value("ph", "") != "X") continue;
    const std::string name = event["name"];
    ++census.all[name];
    if (event.contains("args") && event["args"].value("tprof: unwound", false)) ++census.unwound[name];
  }
  return census;
}

std::string describe(const NameCounts& counts) {
  std::string text;
  for (const auto& [name, count] : counts) text += name + " x" + std::to_string(count) + "; ";
  return text;
}

void expect_valid(const fs::path& trace) {
  const std::vector<std::string> violations = validate_trace_file(trace);
  std::string listed;
  for (const auto& violation : violations) listed += "  " + violation + "\n";
  EXPECT_TRUE(violations.empty()) << trace << " breaks consumer rules:\n" << listed;
}

// Share of torch's aten:: ops (by name, with multiplicity) that tprof's trace holds.
double recall(const NameCounts& recorded, const std::vector<std::string>& reference, size_t repeat,
              std::string* detail) {
  NameCounts expected;
  for (const std::string& name : reference) expected[name] += repeat;
  size_t matched = 0, total = 0;
  for (const auto& [name, count] : expected) {
    const auto found = recorded.find(name);
    const size_t have = found == recorded.end() ? 0 : found->second;
    matched += std::min(have, count);
    total += count;
    if (have < count) *detail += "  " + name + ": " + std::to_string(have) + " of " + std::to_string(count) + "\n";
  }
  *detail = std::to_string(matched) + "/" + std::to_string(total) + "\n" + *detail;
  return total == 0 ? 0.0 : double(matched) / double(total);
}

class TargetHarm : public ::testing::TestWithParam<HarmCase> {
 protected:
  void SetUp() override {
    if (!testing::has_tracing_capabilities())
      GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root (CAP_SYS_ADMIN, or CAP_BPF + "
                      "CAP_PERFMON); target safety is NOT tested ***";
    const fs::path script = workload_script("harm_workloads.py");
    if (const auto root = GetParam().root) {
      root_ = RootWorkload::make(*root, script, GetParam().tools);
      if (!root_)
        GTEST_SKIP() << missing_root_message(*root, "target safety on " + describe(*root)) +
                            (GetParam().tools == RootTools::kInductor
                                 ? " (or scripts/make-inductor-root.sh " + suite_name(*root) + " failed)"
                                 : "");
      environment_ = root_->environment();
    } else {
      environment_ = host_workload(scratch_.path(), script);
    }
  }

  std::vector<std::string> arguments(std::vector<std::string> extra) const {
    std::vector<std::string> all = {"--scenario", GetParam().scenario};
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  }

  ScratchDirectory scratch_;
  std::unique_ptr<RootWorkload> root_;
  WorkloadEnvironment environment_;
};

TEST_P(TargetHarm, TargetSurvivesFullTracingAndTheTraceHoldsItsOps) {
  const HarmCase& harm = GetParam();
  const std::string steps = std::to_string(harm.steps);
  run_workload(environment_, arguments({"--steps", steps, "--reference-out",
                                        (environment_.scratch_for_target / "reference.json").string()}));
  const nlohmann::json reference =
      nlohmann::json::parse(std::ifstream(environment_.scratch_for_us / "reference.json"));

  const fs::path trace = scratch_.path() / "harm.pt.trace.json";
  HarmWorkload workload(environment_, arguments({"--steps", steps}));
  AttachedTprof tprof(workload.pid(), trace);
  workload.process().write_stdin("go\n");
  const nlohmann::json counts = read_counts(workload.process());
  tprof.stop();
  workload.expect_clean_exit();

  // The target saw exactly what it sees untraced.
  EXPECT_EQ(counts, reference["counts"]) << "the traced run's counts differ from the untraced run's";
  EXPECT_EQ(counts["caught"], counts["expected"]);

  expect_valid(trace);
  EXPECT_EQ(fs::status(trace).permissions(), fs::perms::owner_read | fs::perms::owner_write)
      << "traces hold paths, arguments and code: 0600 by default";
  const OpCensus census = census_of(load_trace(trace));
  std::string detail;
  const double share = recall(census.all, reference["ops"], reference["threads"], &detail);
  ::testing::Test::RecordProperty("recall", std::to_string(share));
  EXPECT_GE(share, kMinimumRecall) << "op recall against torch's profiler " << detail;
  EXPECT_EQ(OpCensus::of(census.unwound, harm.unwound_op), size_t(harm.steps) * harm.unwound_per_step * reference["threads"].get<size_t>())
      << harm.unwound_op << " calls flagged 'tprof: unwound'; all unwound: " << describe(census.unwound);
  // Its JIT-only operator's calls have no c10 name: no range, as torch records none, counted.
  if (harm.scenario == "boxed-op-error") {
    EXPECT_NE(tprof.console().find(std::to_string(harm.steps) + " calls through torch.ops had no c10 operator name"),
              std::string::npos)
        << tprof.console();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Scenarios, TargetHarm,
    ::testing::Values(HarmCase{"caught-op-error", kHost, 200, "aten::topk", 1},
                      HarmCase{"caught-op-error", TorchRoot::kTrixie, 200, "aten::topk", 1},
                      HarmCase{"nested-op-error", kHost, 50, "aten::cat", 1},
                      HarmCase{"nested-op-error", TorchRoot::kTrixie, 50, "aten::cat", 1},
                      // Ops called through torch.ops, which tprof probes where they pass
                      // libtorch_python's boxed dispatch, not at their at::_ops::<op>::call.
                      HarmCase{"boxed-op-error", kHost, 50, "aten::index_select", 1},
                      HarmCase{"boxed-op-error", TorchRoot::kTrixie, 50, "aten::index_select", 1},
                      HarmCase{"backward-raises", kHost, 20, kFailingNodeRange, 1},
                      HarmCase{"backward-raises", TorchRoot::kTrixie, 20, kFailingNodeRange, 1},
                      HarmCase{"python-raise", kHost, 20, "aten::mul", 1},
                      HarmCase{"python-raise", TorchRoot::kTrixie, 20, "aten::mul", 1},
                      HarmCase{"dataloader-fork", kHost, 20, "aten::topk", 1},
                      HarmCase{"dataloader-fork", TorchRoot::kTrixie, 20, "aten::topk", 1},
                      HarmCase{"threads", kHost, 3, "aten::topk", 1},
                      HarmCase{"threads", TorchRoot::kTrixie, 3, "aten::topk", 1},
                      // torch 2.14, built by GCC 16: its own op, boxed-dispatch and region sites.
                      HarmCase{"caught-op-error", TorchRoot::kSid, 200, "aten::topk", 1},
                      HarmCase{"nested-op-error", TorchRoot::kSid, 50, "aten::cat", 1},
                      HarmCase{"dataloader-fork", TorchRoot::kSid, 20, "aten::topk", 1},
                      HarmCase{"threads", TorchRoot::kSid, 3, "aten::topk", 1},
                      HarmCase{"boxed-op-error", TorchRoot::kSid, 50, "aten::index_select", 1},
                      HarmCase{"backward-raises", TorchRoot::kSid, 20, kFailingNodeRange, 1},
                      HarmCase{"python-raise", TorchRoot::kSid, 20, "aten::mul", 1},
                      HarmCase{"compiled-op-error", TorchRoot::kSid, 20, "aten::index_select", 1},
                      HarmCase{"recompiled-op-error", TorchRoot::kSid, 20, "aten::index_select", 1},
                      // torch 2.x only: torch 1.13 has no torch.compile.
                      HarmCase{"compiled-op-error", TorchRoot::kTrixie, 20, "aten::index_select", 1},
                      // A compile per step: the wait counters tprof probes run while it records.
                      HarmCase{"recompiled-op-error", TorchRoot::kTrixie, 20, "aten::index_select", 1},
                      // An exception thrown inside one of inductor's C++ kernels, which tprof
                      // probes while the target runs.
                      HarmCase{"inductor-kernel-error", TorchRoot::kTrixie, 20, "cpp_fused_add_index_select_mul_sin_0", 1,
                               RootTools::kInductor}),
    [](const auto& info) {
      const std::string torch = !info.param.root                        ? "_torch113"
                                : *info.param.root == TorchRoot::kTrixie ? "_torch26"
                                                                         : "_torch214";
      std::string name = info.param.scenario + torch;
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// Stops a --until-stopped workload and checks that it ran, caught every error it threw, and
// exited cleanly.
void stop_and_expect_every_error_caught(HarmWorkload& workload) {
  workload.process().write_stdin("stop\n");
  const nlohmann::json counts = read_counts(workload.process());
  workload.expect_clean_exit();
  EXPECT_GT(counts["steps"].get<int>(), 0);
  EXPECT_EQ(counts["caught"], counts["steps"]) << "every iteration caught its error";
  EXPECT_EQ(counts["caught"], counts["expected"]);
}

// Attach and detach 20 times while the target throws and catches as fast as it can: every
// probe set comes and goes with exceptions in flight.
TEST(TargetHarmAttachCycles, AttachAndDetachTwentyTimesWhileExceptionsAreInFlight) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; target safety is NOT tested ***";
  ScratchDirectory scratch;
  const WorkloadEnvironment environment = host_workload(scratch.path(), workload_script("harm_workloads.py"));
  HarmWorkload workload(environment, {"--scenario", "caught-op-error", "--until-stopped"});
  workload.process().write_stdin("go\n");
  for (int cycle = 0; cycle < kAttachCycles; ++cycle) {
    SCOPED_TRACE("attach " + std::to_string(cycle + 1));
    const fs::path trace = scratch.path() / ("cycle" + std::to_string(cycle) + ".pt.trace.json");
    AttachedTprof tprof(workload.pid(), trace, {"--duration", "0.3", "--no-et"});
    tprof.stop(/*interrupt=*/false);
    ASSERT_TRUE(workload.process().is_running()) << "the target died during attach " << cycle + 1;
    expect_valid(trace);
    // Each window holds the loop's ops: as many topk as add (one may straddle either edge),
    // every topk closed by its exception.
    const OpCensus census = census_of(load_trace(trace));
    const size_t topk = OpCensus::of(census.all, "aten::topk"), add = OpCensus::of(census.all, "aten::add");
    EXPECT_GT(topk, 0u);
    EXPECT_LE(std::max(topk, add) - std::min(topk, add), 1u) << topk << " topk, " << add << " add";
    EXPECT_GE(OpCensus::of(census.unwound, "aten::topk") + 1, topk) << "topk ended by its exception";
  }
  stop_and_expect_every_error_caught(workload);
}

// --memory adds probes on the CPU allocator's New and Delete: Delete runs in the destructors an
// unwinding exception calls, so its probe comes and goes with frees in flight from unwinding.
TEST(TargetHarmAttachCycles, MemoryProbesComeAndGoWhileExceptionsUnwindThroughFrees) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; target safety is NOT tested ***";
  ScratchDirectory scratch;
  const WorkloadEnvironment environment = host_workload(scratch.path(), workload_script("harm_workloads.py"));
  HarmWorkload workload(environment, {"--scenario", "caught-op-error", "--until-stopped"});
  workload.process().write_stdin("go\n");
  for (int cycle = 0; cycle < kAttachCycles / 2; ++cycle) {
    SCOPED_TRACE("attach " + std::to_string(cycle + 1));
    const fs::path trace = scratch.path() / ("memory" + std::to_string(cycle) + ".pt.trace.json");
    AttachedTprof tprof(workload.pid(), trace, {"--duration", "0.3", "--no-et", "--memory"});
    tprof.stop(/*interrupt=*/false);
    ASSERT_TRUE(workload.process().is_running()) << "the target died during attach " << cycle + 1;
    expect_valid(trace);
    const auto document = load_trace(trace);
    size_t memory_events = 0;
    for (const auto& event : document.at("traceEvents")) memory_events += event.value("name", "") == "[memory]";
    EXPECT_GT(memory_events, 0u) << "no allocation or free recorded";
  }
  stop_and_expect_every_error_caught(workload);
}

// --max-overhead puts the per-op probes in and takes them out again and again within one
// attach: windows of ops come and go with exceptions in flight (time windows here: the loop
// has no optimizer). At 5% its windows cost more than 5% of the time they are open, so they
// close after 50 ms: ~95 windows in 20 s on the 2-vCPU test VM, each probing only the ops the
// loop has called.
TEST(TargetHarmAttachCycles, WindowsOfOpsComeAndGoWhileExceptionsAreInFlight) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; target safety is NOT tested ***";
  ScratchDirectory scratch;
  const WorkloadEnvironment environment = host_workload(scratch.path(), workload_script("harm_workloads.py"));
  HarmWorkload workload(environment, {"--scenario", "caught-op-error", "--until-stopped"});
  workload.process().write_stdin("go\n");
  const fs::path trace = scratch.path() / "windows.pt.trace.json";
  AttachedTprof tprof(workload.pid(), trace, {"--duration", "20", "--no-et", "--max-overhead", "5%"});
  tprof.stop(/*interrupt=*/false);
  ASSERT_TRUE(workload.process().is_running()) << "the target died while windows came and went";
  expect_valid(trace);
  const nlohmann::json windows = load_trace(trace).at("tprof_summary").at("op_windows");
  std::cout << "windows of ops: " << windows.dump() << '\n';
  EXPECT_GE(windows.at("windows").get<uint64_t>(), 2u) << windows.dump();
  const OpCensus census = census_of(load_trace(trace));
  EXPECT_GT(OpCensus::of(census.all, "aten::topk"), 0u);
  stop_and_expect_every_error_caught(workload);
}

// tprof itself killed (SIGKILL: no detach code runs) while the target throws: the kernel drops
// every probe with tprof's links, and no return address was ever swapped, so nothing is left
// behind in the target.
TEST(TargetHarmAttachCycles, TargetOutlivesTprofBeingKilledMidRecording) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; target safety is NOT tested ***";
  ScratchDirectory scratch;
  const WorkloadEnvironment environment = host_workload(scratch.path(), workload_script("harm_workloads.py"));
  HarmWorkload workload(environment, {"--scenario", "nested-op-error", "--until-stopped"});
  workload.process().write_stdin("go\n");
  for (int kill = 0; kill < kKilledAttaches; ++kill) {
    SCOPED_TRACE("kill " + std::to_string(kill + 1));
    ChildProcess tprof({.argv = {testing::tprof_binary(), "attach", workload.pid(), "--output",
                                 (scratch.path() / ("killed" + std::to_string(kill) + ".json")).string()},
                        .pipe_stderr = true});
    if (!tprof.stderr_lines().read_line_containing("attached", kStartTimeout))
      fail_harness("tprof never printed 'attached':\n" + tprof.stderr_lines().transcript());
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + 150 * kill));
    tprof.send_signal(SIGKILL);
    ASSERT_TRUE(tprof.wait_for_exit(kRunTimeout).has_value());
    ASSERT_TRUE(workload.process().is_running()) << "the target died with tprof";
  }
  workload.process().write_stdin("stop\n");
  const nlohmann::json counts = read_counts(workload.process());
  workload.expect_clean_exit();
  EXPECT_GT(counts["steps"].get<int>(), 0);
  EXPECT_EQ(counts["caught"], counts["expected"]);
}

}  // namespace
}  // namespace tprof::test
