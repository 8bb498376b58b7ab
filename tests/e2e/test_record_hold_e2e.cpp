// `tprof record` holds the command at torch's load until its probes are in
// (userspace/session/process_holder.h): every op from the first is recorded, on each torch this
// machine has, and the held process cannot tell.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/torch_libraries.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct Finished {
  ExitStatus status;
  std::vector<std::string> console;  // tprof's stderr
  std::vector<std::string> output;   // the command's stdout
};

Finished record(const std::vector<std::string>& arguments, const std::vector<std::string>& environment = {}) {
  std::vector<std::string> argv = {"env"};
  argv.insert(argv.end(), environment.begin(), environment.end());
  argv.push_back(testing::tprof_binary());
  argv.push_back("record");
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  ChildProcess tprof({.argv = argv, .pipe_stdout = true, .pipe_stderr = true});
  tprof.stderr_lines().read_to_end(300s);
  tprof.stdout_lines().read_to_end(10s);
  const auto status = tprof.wait_for_exit(60s);
  if (!status) testing::fail_harness("tprof did not exit:\n" + tprof.stderr_lines().transcript());
  return {*status, tprof.stderr_lines().lines_read(), tprof.stdout_lines().lines_read()};
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

nlohmann::json load(const fs::path& trace) {
  std::ifstream in(trace);
  return nlohmann::json::parse(in);
}

// The events named `name` in a Chrome trace.
std::vector<nlohmann::json> events_named(const nlohmann::json& trace, const std::string& name) {
  std::vector<nlohmann::json> found;
  for (const auto& event : trace.at("traceEvents"))
    if (event.value("name", "") == name) found.push_back(event);
  return found;
}

// validate_trace_file's complaints, one per line; "" for a valid trace.
std::string invalid(const fs::path& trace) { return joined(validate_trace_file(trace)); }

std::string call_stack(const nlohmann::json& event) {
  const auto& args = event.at("args");
  return args.contains("Call stack") ? args.at("Call stack").get<std::string>() : "";
}

// The program of the first-op test: imports torch and at once calls torch.mm N times (N from
// argv), then says how long the loop took after the import.
constexpr const char* kMatmulProgram =
    "import sys, time, torch\n"
    "start = time.monotonic()\n"
    "a = torch.ones(2, 2)\n"
    "for _ in range(int(sys.argv[1])):\n"
    "    torch.mm(a, a)\n"
    "print('LOOP_S', time.monotonic() - start)\n";

class RecordHold : public ::testing::TestWithParam<const testing::TorchInstall*> {
 protected:
  void SetUp() override {
    if (!testing::has_tracing_capabilities())
      GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; the hold is NOT tested ***";
    if (const auto missing = GetParam()->missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  }
  ScratchDirectory scratch_;
};

TEST_P(RecordHold, EveryMmFromTheFirstIsRecordedWithItsPythonStack) {
  const testing::TorchInstall& torch = *GetParam();
  for (const int calls : {1, 10, 10000}) {
    SCOPED_TRACE(std::to_string(calls) + " calls");
    const fs::path trace = scratch_.path() / ("mm" + std::to_string(calls) + ".pt.trace.json");
    std::vector<std::string> arguments = {"-o", trace.string(), "--no-et", "--"};
    arguments.insert(arguments.end(), torch.python.begin(), torch.python.end());
    arguments.insert(arguments.end(), {"-c", kMatmulProgram, std::to_string(calls)});
    const Finished finished = record(arguments);
    ASSERT_TRUE(finished.status.succeeded()) << finished.status.describe() << "\n" << joined(finished.console);
    ASSERT_EQ(invalid(trace), "");
    const auto matmuls = events_named(load(trace), "aten::mm");
    EXPECT_EQ(matmuls.size(), static_cast<size_t>(calls)) << joined(finished.output) << joined(finished.console);
    size_t with_stack = 0;
    for (const auto& matmul : matmuls) with_stack += call_stack(matmul).find("<string>(5): <module>") != std::string::npos;
    EXPECT_EQ(with_stack, matmuls.size()) << "first op's stack: " << (matmuls.empty() ? "" : call_stack(matmuls[0]));
    std::cout << torch.name << ": " << calls << " calls, " << joined(finished.output);
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, RecordHold,
                         ::testing::Values(&testing::debian_torch113(), &testing::trixie_torch26(),
                                           &testing::sid_torch214()),
                         [](const auto& info) { return info.param->name; });

class RecordOutcome : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::has_tracing_capabilities())
      GTEST_SKIP() << "\n*** SKIPPED LOUDLY: tprof record needs root; it is NOT tested ***";
  }
  ScratchDirectory scratch_;
};

TEST_F(RecordOutcome, ACommandWithoutTorchExitsWithItsStatusAndLeavesAnEmptyTrace) {
  const Finished finished = record({"--output-dir", scratch_.path().string(), "--", "sh", "-c", "exit 3"});
  EXPECT_TRUE(finished.status.exited_normally && finished.status.code == 3) << finished.status.describe();
  ASSERT_EQ(finished.console.size(), 1U) << joined(finished.console);
  EXPECT_TRUE(finished.console[0].starts_with("tprof: sh exited with status 3 before it loaded torch: nothing was "
                                              "recorded (wrote "))
      << finished.console[0];
  size_t traces = 0;
  for (const auto& entry : fs::directory_iterator(scratch_.path())) {
    if (!entry.path().string().ends_with(".pt.trace.json")) continue;
    ++traces;
    // Valid for every consumer but those that need a step, and there was none.
    EXPECT_EQ(invalid(entry.path()),
              "[profiler-step] no ProfilerStep#N user_annotation (HTA iterations, Chakra's critical path and the "
              "TB step view need one)\n");
    EXPECT_TRUE(events_named(load(entry.path()), "aten::mm").empty());
  }
  EXPECT_EQ(traces, 1U);
}

TEST_F(RecordOutcome, ACommandKilledBySigsegvIsReportedWithTheTraceOfWhatRan) {
  const fs::path trace = scratch_.path() / "crash.pt.trace.json";
  const std::string program =
      "import os, resource, signal, torch\n"
      "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
      "a = torch.ones(2, 2)\n"
      "for _ in range(5): torch.mm(a, a)\n"
      "os.kill(os.getpid(), signal.SIGSEGV)\n";
  const Finished finished = record({"-o", trace.string(), "--no-et", "--", "/usr/bin/python3", "-c", program});
  EXPECT_TRUE(finished.status.exited_normally && finished.status.code == 139) << finished.status.describe();
  EXPECT_NE(joined(finished.console).find("tprof: /usr/bin/python3 was killed by SIGSEGV"), std::string::npos)
      << joined(finished.console);
  ASSERT_EQ(invalid(trace), "") << joined(finished.console);
  EXPECT_EQ(events_named(load(trace), "aten::mm").size(), 5U);
}

// The held process is a forked child whose parent waits for it with WUNTRACED | WCONTINUED:
// the parent must see one status, its exit. While the child imports torch (and is held), two
// of its threads sleep in raw nanosleep() and epoll_wait() calls, which report EINTR (Python's
// own calls would retry it unseen), and a time.sleep(0.3) runs across the hold. A SIGURG
// handler, which makes the hold use its second signal, must never run.
constexpr const char* kInvisibleHoldProgram = R"(
import ctypes, os, signal, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child:
    statuses = []
    while True:
        pid, status = os.waitpid(child, os.WUNTRACED | os.WCONTINUED)
        statuses.append(status)
        if os.WIFEXITED(status) or os.WIFSIGNALED(status): break
    print('PARENT_SAW', statuses, flush=True)
    sys.exit(0)
urgent = []
signal.signal(signal.SIGURG, lambda *_: urgent.append(1))
importing = True
interrupted = []
class timespec(ctypes.Structure): _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]
def nanosleeps():
    while importing:
        if libc.nanosleep(ctypes.byref(timespec(0, 20_000_000)), None) != 0:
            interrupted.append('nanosleep errno %d' % ctypes.get_errno())
def epoll_waits():
    epoll = libc.epoll_create1(0)
    events = ctypes.create_string_buffer(12)
    while importing:
        if libc.epoll_wait(epoll, events, 1, 20) < 0:
            interrupted.append('epoll_wait errno %d' % ctypes.get_errno())
slept = []
def long_sleep():
    start = time.monotonic(); time.sleep(0.3); slept.append(time.monotonic() - start)
threads = [threading.Thread(target=f) for f in (nanosleeps, epoll_waits, long_sleep)]
for thread in threads: thread.start()
import torch
a = torch.ones(2, 2)
torch.mm(a, a)
importing = False
for thread in threads: thread.join()
print('CHILD', 'interrupted', interrupted, 'urgent', len(urgent), 'slept', slept, flush=True)
)";

TEST_F(RecordOutcome, TheHeldProcessCannotTellItWasHeld) {
  const Finished finished =
      record({"--follow", "--output-dir", scratch_.path().string(), "--no-et", "--", "/usr/bin/python3", "-c",
              kInvisibleHoldProgram});
  EXPECT_TRUE(finished.status.succeeded()) << finished.status.describe() << "\n" << joined(finished.console);
  const std::string output = joined(finished.output);
  EXPECT_NE(output.find("PARENT_SAW [0]"), std::string::npos) << output;  // exited 0, nothing else
  // The sleep returns normally; late by the hold, since the held thread holds the GIL.
  const size_t child = output.find("CHILD interrupted [] urgent 0 slept [");
  ASSERT_NE(child, std::string::npos) << output;
  EXPECT_GE(std::stod(output.substr(child + std::string_view("CHILD interrupted [] urgent 0 slept [").size())), 0.3)
      << output;
  size_t held_traces = 0;
  for (const auto& entry : fs::directory_iterator(scratch_.path())) {
    if (!entry.path().string().ends_with(".pt.trace.json")) continue;
    held_traces += events_named(load(entry.path()), "aten::mm").size() == 1;
  }
  EXPECT_EQ(held_traces, 1U) << "the child was held and recorded from its first op\n" << joined(finished.console);
}

// The mm counts of every trace in `directory`, by the pid in the file name.
std::map<std::string, size_t> matmuls_by_trace(const fs::path& directory) {
  std::map<std::string, size_t> counts;
  for (const auto& entry : fs::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (!name.ends_with(".pt.trace.json")) continue;
    EXPECT_EQ(invalid(entry.path()), "") << name;
    const size_t first = name.find('_') + 1;
    counts[name.substr(first, name.find('.') - first)] = events_named(load(entry.path()), "aten::mm").size();
  }
  return counts;
}

TEST_F(RecordOutcome, FollowRecordsEachSpawnedWorkerFromItsFirstOp) {
  const Finished finished = record({"--follow", "--output-dir", scratch_.path().string(), "--no-et", "--",
                                    "/usr/bin/python3", workload_script("spawn_job.py").string()});
  ASSERT_TRUE(finished.status.succeeded()) << finished.status.describe() << "\n" << joined(finished.console);
  std::map<std::string, size_t> expected;  // worker r's pid: r + 1 calls
  for (const std::string& line : finished.output) {
    std::istringstream words(line);
    std::string tag, pid;
    int rank = -1;
    if (words >> tag >> rank >> pid && tag == "WORKER") expected[pid] = static_cast<size_t>(rank) + 1;
  }
  ASSERT_EQ(expected.size(), 3U) << joined(finished.output);
  std::map<std::string, size_t> recorded = matmuls_by_trace(scratch_.path());
  for (const auto& [pid, calls] : expected) {
    EXPECT_EQ(recorded[pid], calls) << "worker " << pid << "\n" << joined(finished.console);
    recorded.erase(pid);
  }
  // The parent, which ran no op; nothing else loaded torch.
  ASSERT_EQ(recorded.size(), 1U) << joined(finished.console);
  EXPECT_EQ(recorded.begin()->second, 0U);
}

TEST_F(RecordOutcome, FollowRecordsAForkedChildFromTheFork) {
  const std::string program =
      "import os, torch\n"
      "a = torch.ones(2, 2)\n"
      "torch.mm(a, a)\n"
      "child = os.fork()\n"
      "if child == 0:\n"
      "    for _ in range(7): torch.mm(a, a)\n"
      "    print('CHILD', os.getpid(), flush=True)\n"
      "    os._exit(0)\n"
      "os.waitpid(child, 0)\n"
      "print('PARENT', os.getpid(), flush=True)\n";
  const Finished finished =
      record({"--follow", "--output-dir", scratch_.path().string(), "--no-et", "--", "/usr/bin/python3", "-c", program});
  ASSERT_TRUE(finished.status.succeeded()) << finished.status.describe() << "\n" << joined(finished.console);
  std::map<std::string, size_t> expected;
  for (const std::string& line : finished.output) {
    if (line.starts_with("CHILD ")) expected[line.substr(6)] = 7;
    if (line.starts_with("PARENT ")) expected[line.substr(7)] = 1;
  }
  ASSERT_EQ(expected.size(), 2U) << joined(finished.output);
  EXPECT_EQ(matmuls_by_trace(scratch_.path()), expected) << joined(finished.console);
}

// CUDA loads the injection library at cuInit, long after torch, and calls its
// InitializeInjection: the process is held again there and the library's probe put in, so that
// GPU activity is recorded from the first CUDA call. Without a GPU, the program loads the library
// and calls it itself, as CUDA would (without CUDA, the library stays out of the way).
TEST_F(RecordOutcome, TheCudaInjectionLibraryIsProbedWhenCudaLoadsIt) {
  const fs::path trace = scratch_.path() / "cuda.pt.trace.json";
  const std::string program =
      "import ctypes, os, torch\n"
      "a = torch.ones(2, 2)\n"
      "torch.mm(a, a)\n"
      "ctypes.CDLL(os.environ['CUDA_INJECTION64_PATH']).InitializeInjection()\n"
      "torch.mm(a, a)\n";
  const Finished finished = record({"-o", trace.string(), "--no-et", "--", "/usr/bin/python3", "-c", program});
  ASSERT_TRUE(finished.status.succeeded()) << finished.status.describe() << "\n" << joined(finished.console);
  EXPECT_NE(joined(finished.console).find("GPU timing from CUDA's initialization on: CUPTI activity through "),
            std::string::npos)
      << joined(finished.console);
  EXPECT_EQ(events_named(load(trace), "aten::mm").size(), 2U);
}

// tprof kills itself while the target waits at a hold: at its load of torch, or at its first
// dlopen after that (sqlite3's extension module), where torch 2.x's inductor kernels are looked
// for. The kernel detaches the target, which runs to its end.
void expect_target_runs_on_when_tprof_dies_holding_it_at(const fs::path& scratch, const std::string& hold) {
  const fs::path done = scratch / ("done-" + hold);
  const std::string program =
      "import sys, torch\na = torch.ones(2, 2)\ntorch.mm(a, a)\nimport sqlite3\n"
      "open(sys.argv[1], 'w').write('ok')\n";
  const Finished finished = record({"--output-dir", scratch.string(), "--", "/usr/bin/python3", "-c", program,
                                    done.string()},
                                   {"TPROF_TEST_DIE_WHILE_HOLDING=" + hold});
  EXPECT_FALSE(finished.status.exited_normally) << "tprof was to kill itself while holding the target at " << hold;
  for (int waited_ms = 0; waited_ms < 60'000 && !fs::exists(done); waited_ms += 100) std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(fs::exists(done)) << "the target did not run to its end after tprof died holding it at " << hold;
  std::ifstream in(done);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "ok");
}

TEST_F(RecordOutcome, AHeldTargetRunsOnWhenTprofDiesHoldingIt) {
  expect_target_runs_on_when_tprof_dies_holding_it_at(scratch_.path(), "torch-load");
}

TEST_F(RecordOutcome, ATargetHeldAtALaterLoadRunsOnWhenTprofDiesHoldingIt) {
  expect_target_runs_on_when_tprof_dies_holding_it_at(scratch_.path(), "later-load");
}

TEST_F(RecordOutcome, ASignalSentToTprofIsPassedOnToTheCommand) {
  const fs::path trace = scratch_.path() / "term.pt.trace.json";
  const std::string program =
      "import signal, sys, time, torch\n"
      "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
      "print('READY', flush=True)\n"
      "while True: torch.mm(torch.ones(2, 2), torch.ones(2, 2)); time.sleep(0.01)\n";
  ChildProcess tprof({.argv = {testing::tprof_binary(), "record", "-o", trace.string(), "--no-et", "--",
                               "/usr/bin/python3", "-c", program},
                      .pipe_stdout = true,
                      .pipe_stderr = true});
  ASSERT_TRUE(tprof.stdout_lines().read_line_containing("READY", 120s)) << tprof.stderr_lines().transcript();
  std::this_thread::sleep_for(300ms);
  tprof.send_signal(SIGTERM);
  const auto status = tprof.wait_for_exit(60s);
  ASSERT_TRUE(status) << "tprof did not exit";
  EXPECT_TRUE(status->exited_normally && status->code == 7) << status->describe();
  EXPECT_EQ(invalid(trace), "");
  EXPECT_FALSE(events_named(load(trace), "aten::mm").empty());
}

}  // namespace
}  // namespace tprof::test
