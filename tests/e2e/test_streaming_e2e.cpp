// The streaming output, end to end: tprof killed with SIGKILL mid-recording leaves
// "<file>.partial" files flushed as it went, and `tprof recover` turns them into a valid trace
// and Execution Trace holding the ops recorded before the last flush.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <zlib.h>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::fail_harness;

constexpr auto kStartTimeout = 180s;
constexpr auto kRunTimeout = 120s;
// Long enough for several of the once-a-second flushes.
constexpr auto kRecordingBeforeKill = 3500ms;

// The aten:: ops of a trace's cpu_op events.
size_t aten_ops_in(const fs::path& trace) {
  size_t aten_ops = 0;
  for (const auto& [name, count] : complete_event_name_counts(load_trace(trace), "cpu_op"))
    if (name.starts_with("aten::")) aten_ops += count;
  return aten_ops;
}

// `tprof recover` with `arguments`: its exit status and what it wrote to stderr.
std::pair<std::optional<ExitStatus>, std::vector<std::string>> run_recover(const std::vector<std::string>& arguments) {
  std::vector<std::string> argv = {testing::tprof_binary(), "recover"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  ChildProcess recover({.argv = argv, .pipe_stderr = true});
  recover.stderr_lines().read_to_end(kRunTimeout);
  return {recover.wait_for_exit(kRunTimeout), recover.stderr_lines().lines_read()};
}

TEST(StreamingOutput, AKilledTprofLeavesPartialFilesThatRecoverIntoValidFiles) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; recovery after a kill is NOT tested ***";
  ScratchDirectory scratch;
  const std::unique_ptr<ChildProcess> training = start_endless_training(scratch.path());
  ChildProcess& workload = *training;

  const fs::path trace = scratch.path() / "killed.pt.trace.json.gz";
  const fs::path execution_trace = scratch.path() / "execution_trace" / "killed.et.json.gz";
  ChildProcess tprof({.argv = {testing::tprof_binary(), "attach", std::to_string(workload.pid()), "--output",
                               trace.string()},
                      .pipe_stderr = true});
  if (!tprof.stderr_lines().read_line_containing("attached", kStartTimeout))
    fail_harness("tprof never printed 'attached':\n" + tprof.stderr_lines().transcript());
  std::this_thread::sleep_for(kRecordingBeforeKill);

  // While tprof records, its files are locked: recover refuses each, one line naming it, and
  // the recording goes on.
  const fs::path trace_partial = trace.string() + ".partial";
  const fs::path execution_trace_partial = execution_trace.string() + ".partial";
  const auto [refused, refusals] = run_recover({trace_partial.string(), execution_trace_partial.string()});
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code, 1) << refused->describe();
  ASSERT_EQ(refusals.size(), 2u);
  const fs::path refused_paths[] = {trace_partial, execution_trace_partial};
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_TRUE(refusals[i].starts_with("tprof: error: cannot recover " + refused_paths[i].string() + ": "))
        << refusals[i];
    EXPECT_NE(refusals[i].find("is still being written by a running tprof"), std::string::npos) << refusals[i];
  }
  ASSERT_TRUE(fs::exists(trace_partial));
  ASSERT_TRUE(fs::exists(execution_trace_partial));
  ASSERT_TRUE(tprof.is_running()) << tprof.stderr_lines().transcript();
  std::this_thread::sleep_for(1500ms);  // a flush after the refusal: the files are still written
  tprof.send_signal(SIGKILL);
  ASSERT_TRUE(tprof.wait_for_exit(kRunTimeout).has_value());
  ASSERT_TRUE(workload.is_running()) << "the target died with tprof";

  ASSERT_TRUE(fs::exists(trace_partial));
  ASSERT_TRUE(fs::exists(execution_trace_partial));
  EXPECT_FALSE(fs::exists(trace)) << "a killed tprof cannot have finished the file";

  const CommandResult recovered = run_command(
      {testing::tprof_binary(), "recover", trace_partial.string(), execution_trace_partial.string()}, kRunTimeout);
  ASSERT_TRUE(recovered.status && recovered.status->succeeded())
      << (recovered.status ? recovered.status->describe() : "timed out");
  EXPECT_FALSE(fs::exists(trace_partial));
  EXPECT_FALSE(fs::exists(execution_trace_partial));

  const std::vector<std::string> violations = validate_trace_file(trace);
  std::string listed;
  for (size_t i = 0; i < violations.size() && i < 5; ++i) listed += violations[i] + "\n";
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first:\n" << listed;
  const TraceJson document = load_trace(trace);
  EXPECT_EQ(document.at("tprof_summary").at("recovered"), true);
  const size_t aten_ops = aten_ops_in(trace);
  std::cout << "recovered after " << kRecordingBeforeKill.count() << " ms: " << aten_ops << " aten ops\n";
  EXPECT_GT(aten_ops, 1000u) << "a training loop runs thousands of ops a second; most must survive the kill";

  // The ET: valid JSON ending in the process root, every parent present.
  const nlohmann::json nodes = nlohmann::json::parse(read_trace_text(execution_trace)).at("nodes");
  ASSERT_GT(nodes.size(), 1000u);
  EXPECT_EQ(nodes.back().at("id"), 1);
  std::set<uint64_t> ids;
  for (const auto& node : nodes) ids.insert(node.at("id").get<uint64_t>());
  size_t orphans = 0;
  for (const auto& node : nodes) orphans += !ids.contains(node.at("ctrl_deps").get<uint64_t>());
  // A parent still open at the kill was never written; its children, written at their exit, are.
  EXPECT_LT(orphans, 50u) << "only children of ranges open at the kill may lack their parent";
}

// Ctrl-C while gzip output is being deflated on its writer thread: the signal must reach the
// recording loop (not the writer thread), and the files must be finished and renamed.
TEST(StreamingOutput, AnInterruptedGzipRecordingIsFinishedAndRenamed) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; SIGINT with gzip output is NOT tested ***";
  ScratchDirectory scratch;
  const fs::path trace = scratch.path() / "interrupted.pt.trace.json.gz";
  // Stops tprof with SIGINT once the steps are done, and fails unless it exits 0.
  record_workload_with_tprof(host_workload(scratch.path()), {"--steps", "20"}, trace);
  EXPECT_FALSE(fs::exists(trace.string() + ".partial"));
  EXPECT_TRUE(fs::exists(scratch.path() / "execution_trace" / "interrupted.et.json.gz"));
  const std::vector<std::string> violations = validate_trace_file(trace);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations.front();
  EXPECT_FALSE(load_trace(trace).at("tprof_summary").contains("recovered"));
}

// A disk that fills up mid-recording (a 2 MiB tmpfs, in a mount namespace of tprof's own)
// ends the recording with one error line and a non-zero exit, and keeps what was written as
// .partial files that `tprof recover` turns into a valid trace. The target runs on.
TEST(StreamingOutput, AFullDiskKeepsWhatWasRecordedForRecover) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; a full disk is NOT tested ***";
  ScratchDirectory scratch;
  const std::unique_ptr<ChildProcess> training = start_endless_training(scratch.path());
  ChildProcess& workload = *training;

  const fs::path disk = scratch.path() / "disk";  // the tmpfs, seen only inside tprof's namespace
  const fs::path kept = scratch.path() / "kept";  // what it held when tprof ended
  fs::create_directories(disk);
  fs::create_directories(kept);
  ChildProcess tprof(
      {.argv = {"unshare", "--mount", "--propagation", "private", "sh", "-c",
                "mount -t tmpfs -o size=2m tmpfs " + disk.string() + " && \"$@\"; status=$?; cp -a " + disk.string() +
                    "/. " + kept.string() + "/; exit $status",
                "sh", testing::tprof_binary(), "attach", std::to_string(workload.pid()), "--output",
                (disk / "full.pt.trace.json").string()},
       .pipe_stderr = true});
  const auto status = tprof.wait_for_exit(kRunTimeout);
  ASSERT_TRUE(status.has_value()) << "tprof kept recording onto a full disk";
  tprof.stderr_lines().read_to_end(kRunTimeout);
  const std::vector<std::string>& lines = tprof.stderr_lines().lines_read();
  ASSERT_FALSE(lines.empty());
  EXPECT_FALSE(status->succeeded()) << status->describe();
  const std::string& error = lines.back();
  EXPECT_TRUE(error.starts_with("tprof: error: cannot write ")) << error;
  EXPECT_NE(error.find(std::strerror(ENOSPC)), std::string::npos) << error;
  EXPECT_NE(error.find("tprof recover"), std::string::npos) << error;
  ASSERT_TRUE(workload.is_running()) << "the target died with tprof";

  const fs::path trace_partial = kept / "full.pt.trace.json.partial";
  const fs::path execution_trace_partial = kept / "execution_trace" / "full.et.json.partial";
  ASSERT_TRUE(fs::exists(trace_partial)) << error;
  ASSERT_TRUE(fs::exists(execution_trace_partial)) << error;
  const CommandResult recovered = run_command(
      {testing::tprof_binary(), "recover", trace_partial.string(), execution_trace_partial.string()}, kRunTimeout);
  ASSERT_TRUE(recovered.status && recovered.status->succeeded())
      << (recovered.status ? recovered.status->describe() : "timed out");
  const fs::path trace = kept / "full.pt.trace.json";
  const std::vector<std::string> violations = validate_trace_file(trace);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations.front();
  const size_t aten_ops = aten_ops_in(trace);
  std::cout << "recovered from a full 2 MiB disk: " << aten_ops << " aten ops; tprof said: " << error << "\n";
  EXPECT_GT(aten_ops, 500u) << "what was written before the disk filled must survive";
}

// Usage errors (no file, a name that is not a .partial file, a bad --mode) exit 2 with nothing
// done; a file that cannot be recovered gets one line naming it, exit 1, and the others are
// still recovered. Needs no tracing: the partial file is made by hand.
TEST(StreamingOutput, RecoverExitsTwoOnUsageErrorsAndOneNamingEachFileItCouldNotRecover) {
  ScratchDirectory scratch;
  const fs::path good = scratch.path() / "good.et.json.partial";
  std::ofstream(good) << "{\n  \"schema\": \"1.1.1-chakra.0.0.4\", \"pid\": 7, \"start_ts\": 1,\n  \"nodes\": [\n";
  const fs::path missing = scratch.path() / "missing.et.json.partial";
  const fs::path fifo = scratch.path() / "fifo.et.json.partial";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);

  for (const std::vector<std::string>& usage :
       {std::vector<std::string>{}, {good.string(), (scratch.path() / "notes.txt").string()}, {"--mode", "9", good.string()}}) {
    const auto [status, errors] = run_recover(usage);
    ASSERT_TRUE(status.has_value());
    EXPECT_EQ(status->code, 2) << status->describe();
  }
  ASSERT_TRUE(fs::exists(good)) << "a usage error recovers nothing";

  const auto [status, errors] = run_recover({missing.string(), good.string(), fifo.string()});
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->code, 1) << status->describe();
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_TRUE(errors[0].starts_with("tprof: error: cannot recover " + missing.string() + ": ")) << errors[0];
  EXPECT_TRUE(errors[1].starts_with("tprof: error: cannot recover " + fifo.string() + ": not a regular file"))
      << errors[1];
  EXPECT_FALSE(fs::exists(good));
  EXPECT_TRUE(nlohmann::json::accept(std::ifstream(scratch.path() / "good.et.json")));
}

}  // namespace
}  // namespace tprof::test
