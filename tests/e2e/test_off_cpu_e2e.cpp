// End to end: python_function spans across the time a thread waits, on torch 1.13. The target
// (tests/workloads/sleeps.py) is blocked reading stdin when tprof attaches, then sleeps 0.5 s in
// sleepy(), works, sleeps 0.5 s again and blocks reading stdin until tprof has stopped. Its
// <module> must span the whole window (open at the attach, still open at the stop), and each
// sleepy() call its sleep, though the sampler sees no sleeping thread.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/recorded_workload.h"
#include "tests/support/test_environment.h"
#include "tests/support/trace_validator.h"

namespace tprof::test {
namespace {

namespace fs = std::filesystem;

constexpr long double kSleepUs = 500'000;

struct Slice {
  std::string name;
  long double start_us = 0;
  long double end_us = 0;
};

TEST(OffCpu, PythonSpansCoverWaitsAndTheModuleTheWholeWindow) {
  if (!testing::has_tracing_capabilities())
    GTEST_SKIP() << "\n*** SKIPPED LOUDLY: attaching uprobes needs root; off-CPU spans are NOT tested ***";
  ScratchDirectory scratch;
  const fs::path trace_path = scratch.path() / "sleeps.pt.trace.json";
  std::cout << record_workload_with_tprof(host_workload(scratch.path(), workload_script("sleeps.py")), {"--sleep", "0.5"},
                                          trace_path, {"--no-et"});
  EXPECT_EQ(validate_trace_file(trace_path), std::vector<std::string>{});
  const TraceJson trace = load_trace(trace_path);

  std::vector<Slice> python;
  long double first_event_us = 1e30L;
  long double window_end_us = -1;
  for (const auto& event : trace.at("traceEvents")) {
    const std::string name = event.value("name", "");
    if (name == "Record Window End") window_end_us = event.at("ts").get<long double>();
    if (event.value("ph", "") != "X") continue;
    const long double start = event.at("ts").get<long double>();
    first_event_us = std::min(first_event_us, start);
    if (event.value("cat", "") == "python_function" && name.find("sleeps.py(") != std::string::npos)
      python.push_back({name.substr(name.find("): ") + 3), start, start + event.at("dur").get<long double>()});
  }
  ASSERT_GE(window_end_us, 0) << "no Record Window End";

  const auto modules = std::count_if(python.begin(), python.end(), [](const Slice& s) { return s.name == "<module>"; });
  ASSERT_EQ(modules, 1) << "one <module> span";
  const Slice& module = *std::find_if(python.begin(), python.end(), [](const Slice& s) { return s.name == "<module>"; });
  EXPECT_LE(module.start_us, first_event_us) << "<module> opens with the window, before anything in it";
  EXPECT_GE(module.end_us, window_end_us - 1) << "<module> is still open when recording stops";

  std::vector<Slice> sleeps;
  for (const Slice& slice : python)
    if (slice.name == "sleepy") sleeps.push_back(slice);
  ASSERT_EQ(sleeps.size(), 2u) << "one span per sleepy() call";
  for (const Slice& sleep : sleeps) {
    EXPECT_GE(sleep.end_us - sleep.start_us, kSleepUs * 0.95L) << "sleepy() spans its sleep";
    EXPECT_LE(sleep.end_us - sleep.start_us, kSleepUs * 1.5L);
  }
}

}  // namespace
}  // namespace tprof::test
