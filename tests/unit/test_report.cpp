// `tprof report`: per-op totals from a saved Chrome trace (torch's layout, plain or gzip), self
// time less the ranges directly inside on the same thread, and the table in torch's layout.
#include "userspace/cli/report.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <string>

#include "tests/support/process_harness.h"

namespace tprof {
namespace {

// Thread 1: ProfilerStep#0 [0, 100] holding aten::a [10, 50] (aten::b [20, 30] inside) and
// aten::a [60, 70]; thread 2: aten::a [0, 40], with the same Input Dims as the first one.
constexpr const char* kTrace = R"({"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 7, "tid": 1, "ts": 0.0, "dur": 100.0},
  {"ph": "X", "cat": "cpu_op", "name": "aten::a", "pid": 7, "tid": 1, "ts": 10.0, "dur": 40.0,
   "args": {"Input Dims": [[4, 8], []]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::b", "pid": 7, "tid": 1, "ts": 20.0, "dur": 10.0},
  {"ph": "X", "cat": "cpu_op", "name": "aten::a", "pid": 7, "tid": 1, "ts": 60.0, "dur": 10.0,
   "args": {"Input Dims": [[2]]}},
  {"ph": "X", "cat": "python_function", "name": "train.py(1): main", "pid": 7, "tid": 1, "ts": 0.0, "dur": 100.0},
  {"ph": "X", "cat": "cpu_op", "name": "aten::a", "pid": 7, "tid": 2, "ts": 0.0, "dur": 40.0,
   "args": {"Input Dims": [[4, 8], []]}},
  {"name": "process_name", "ph": "M", "pid": 7, "tid": 0, "args": {"name": "python3"}}
]})";

TEST(Report, TotalsSubtractWhatRunsDirectlyInsideOnTheSameThread) {
  test::ScratchDirectory scratch;
  const auto plain = scratch.path() / "t.json";
  std::ofstream(plain) << kTrace;
  const auto gzip = scratch.path() / "t.json.gz";
  gzFile file = gzopen(gzip.c_str(), "wb");
  gzputs(file, kTrace);
  gzclose(file);
  for (const auto& path : {plain, gzip}) {
    const OperatorTotalsTable table = totals_from_trace(path.string(), false);
    const auto rows = table.rows({});
    ASSERT_EQ(rows.size(), 3u) << path;
    EXPECT_EQ(rows[0].name, "aten::a");
    EXPECT_EQ(rows[0].calls, 3u);
    EXPECT_EQ(rows[0].self_ns, 80'000u) << "30 + 10 + 40 us";
    EXPECT_EQ(rows[0].total_ns, 90'000u);
    EXPECT_EQ(rows[1].name, "ProfilerStep#0");
    EXPECT_EQ(rows[1].self_ns, 50'000u) << "100 less its direct children, 40 and 10";
    EXPECT_EQ(rows[2].name, "aten::b");
    EXPECT_EQ(table.self_ns_total(), 140'000u) << "python_function is not counted, as key_averages does not";
  }
  const OperatorTotalsTable by_shape = totals_from_trace(plain.string(), true);
  const auto rows = by_shape.rows({.sort = "count", .row_limit = 10, .group_by_shape = true});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].name, "aten::a");
  EXPECT_EQ(rows[0].input_shapes, "[[4, 8], []]");
  EXPECT_EQ(rows[0].calls, 2u);
}

TEST(Report, PrintsTorchsTableLayout) {
  OperatorTotalsTable table;
  table.add("aten::addmm", "", 1'500'000, 2'000'000);
  table.add("aten::addmm", "", 500'000, 1'000'000);
  table.add("aten::relu", "", 2'000, 2'000);
  const std::string text = format_summary_table(table, {.sort = "self_cpu_time_total", .row_limit = 1});
  EXPECT_NE(text.find("        Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls  \n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" aten::addmm        99.90%       2.000ms       149.85%       3.000ms       1.500ms             2  \n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("aten::relu"), std::string::npos) << "--row-limit 1";
  EXPECT_TRUE(text.ends_with("Self CPU time total: 2.002ms\n")) << text;
}

TEST(Report, AFileThatIsNoTraceIsAnError) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "not.json";
  std::ofstream(path) << "{\"a\": 1}";
  EXPECT_THROW(totals_from_trace(path.string(), false), std::exception);
}

}  // namespace
}  // namespace tprof
