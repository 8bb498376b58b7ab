// `tprof report`: per-op totals from a saved Chrome trace (torch's layout, plain or gzip), self
// time less the ranges directly inside on the same thread, and the table in torch's layout.
#include "userspace/cli/report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <map>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/process_harness.h"
#include "userspace/cli/error.h"

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

// Writes `text` to `path`, gzip-compressed when the name ends in .gz.
void write_file(const std::filesystem::path& path, const std::string& text) {
  if (path.extension() != ".gz") {
    std::ofstream(path) << text;
    return;
  }
  gzFile file = gzopen(path.c_str(), "wb9");
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
}

// The message of the tprof::Error that reading `text` as a trace throws; "" when none.
std::string report_error(const std::string& text, bool group_by_shape = false, const ReportLimits& limits = {},
                         const std::string& name = "t.json") {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / name;
  write_file(path, text);
  try {
    totals_from_trace(path.string(), group_by_shape, limits);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

std::string nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// A counted event; `fields` come last, so they win over the ones before.
std::string cpu_op(const std::string& fields = "") {
  return R"({"ph": "X", "cat": "cpu_op", "name": "aten::a", "pid": 1, "tid": 1, "ts": 0, "dur": 1)" +
         (fields.empty() ? "" : ", " + fields) + "}";
}

// Finding 10: torch 1.13's export_chrome_trace (use_kineto=False) writes a bare array of events
// and no cat; its "s" flow events and trailing metadata are not ops.
TEST(Report, ReadsTorch113sArrayOfEvents) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "legacy.json";
  std::ofstream(path) << R"([{"name": "outer", "ph": "X", "ts": 10, "dur": 100, "tid": 5, "pid": "CPU functions", "args": {}}, )"
                         R"({"name": "aten::mm", "ph": "X", "ts": 20.5, "dur": 30, "tid": 5, "pid": "CPU functions", "args": {}}, )"
                         R"({"name": "aten::mm", "ph": "s", "ts": 20, "tid": 5, "pid": "CPU functions", "id": 0, "cat": "cpu_to_cuda", "args": {}}])";
  const auto rows = totals_from_trace(path.string(), false).rows({});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].name, "outer");
  EXPECT_EQ(rows[0].self_ns, 70'000u);
  EXPECT_EQ(rows[1].name, "aten::mm");
  EXPECT_EQ(rows[1].calls, 1u);
}

// Finding 5: nesting 100,000 deep is refused at the depth limit, without recursing.
TEST(Report, DeepNestingIsAnErrorNotACrash) {
  const std::string pid = report_error(R"({"traceEvents": [{"ph": "X", "pid": )" + nested(100'000) + "}]}");
  EXPECT_NE(pid.find("t.json: event 0 (byte 37): pid has type array, not number or string"), std::string::npos) << pid;
  const std::string dims =
      report_error(R"({"traceEvents": [)" + cpu_op(R"("args": {"Input Dims": )" + nested(100'000) + "}") + "]}", true);
  EXPECT_NE(dims.find("JSON nested deeper than 64 levels (tprof report's limit)"), std::string::npos) << dims;
  EXPECT_EQ(report_error(R"({"traceEvents": [)" + cpu_op(R"("args": {"Input Dims": )" + nested(58) + "}") + "]}", true), "");
}

// Finding 9: a field of the wrong type names the file and the event, on one line.
TEST(Report, FieldsOfTheWrongTypeNameTheFileAndTheEvent) {
  for (const std::string field : {"ph", "cat", "name"}) {
    const std::string message = report_error(R"({"traceEvents": [{}, {")" + field + R"(": 7}]})");
    EXPECT_NE(message.find("t.json: event 1 (byte "), std::string::npos) << message;
    EXPECT_TRUE(message.ends_with("): " + field + " has type number, not string")) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
  EXPECT_NE(report_error(R"({"traceEvents": [7]})").find("event 0 (byte 19): a number, not an object"),
            std::string::npos);
  EXPECT_NE(report_error(R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "ts": 1}]})").find("without a numeric ts and dur"),
            std::string::npos);
}

// Finding 9: ts and dur whose nanoseconds would overflow an int64 are refused, not wrapped.
TEST(Report, TimesBeyondTheLimitAreRefused) {
  for (const std::string time : {R"("ts": 1e19)", R"("ts": -9300000000000000)", R"("dur": 18446744073709551615)"}) {
    const std::string message = report_error(R"({"traceEvents": [{)" + time + "}]}");
    EXPECT_NE(message.find(": event 0 (byte "), std::string::npos) << time << ": " << message;
    EXPECT_TRUE(message.ends_with(", beyond ±4e15 us")) << time << ": " << message;
  }
  EXPECT_NE(report_error(R"({"traceEvents": [)" + cpu_op(R"("dur": -1)") + "]}").find("negative dur"), std::string::npos);
  EXPECT_EQ(report_error(R"({"traceEvents": [)" + cpu_op(R"("ts": 1700000000000000.5)") + "]}"), "");
}

// Finding 6: the text streams, and each bound stops it with an error naming the file.
TEST(Report, EveryBoundStopsWithAnError) {
  // Gzip bombs: 64 MiB of blanks (which the lexer keeps, as the text since the last token), and
  // 32 MiB of numbers outside the events.
  const std::string blanks = R"({"traceEvents": [)" + std::string(64 << 20, ' ') + "]}";
  EXPECT_NE(report_error(blanks, false, {}, "bomb.json.gz")
                .find("bomb.json.gz: byte 1048577: more than 1048576 bytes in one string or number, or between two"),
            std::string::npos);
  std::string zeros = "0";
  while (zeros.size() < (24 << 20)) zeros += "," + zeros;
  const std::string bomb = R"({"traceEvents": [], "other": [)" + zeros + "]}";
  EXPECT_NE(report_error(bomb, false, {.max_inflated_bytes = 16 << 20}, "bomb.json.gz")
                .find("bomb.json.gz: more than 16777216 bytes of text after gunzip (tprof report's limit)"),
            std::string::npos);
  EXPECT_EQ(report_error(bomb, false, {}, "bomb.json.gz"), "") << "numbers outside the events cost no memory";
  std::string events = R"({"traceEvents": [)" + cpu_op();
  for (int i = 0; i < 10; ++i) events += ", " + cpu_op();
  EXPECT_NE(report_error(events + "]}", false, {.max_ranges = 10}).find("more than 10 op and annotation ranges"),
            std::string::npos);
  EXPECT_NE(report_error(R"({"traceEvents": [{"name": ")" + std::string(2000, 'x') + R"("}]})", false,
                         {.max_token_bytes = 1000})
                .find("t.json: byte 1026: more than 1000 bytes in one string or number"),
            std::string::npos);
  EXPECT_NE(report_error(R"({"traceEvents": [{"name": "\")" + std::string(2000, 'x') + R"("}]})", false,
                         {.max_token_bytes = 1000})
                .find("more than 1000 bytes in one string or number"),
            std::string::npos)
      << "an escaped quote does not end the string";
  EXPECT_NE(report_error(R"({"traceEvents": [)" + std::string(2000, '1') + "]}", false, {.max_token_bytes = 1000})
                .find("more than 1000 bytes in one string or number"),
            std::string::npos);
  EXPECT_NE(report_error(events + "]}", false, {.max_distinct_bytes = 100}).find("bytes of distinct op names"),
            std::string::npos);
}

TEST(Report, BrokenTextIsAnErrorNamingTheByte) {
  EXPECT_NE(report_error(R"({"traceEvents": [{"ph": tru}]})").find("t.json: byte 28: not JSON: syntax error"),
            std::string::npos)
      << report_error(R"({"traceEvents": [{"ph": tru}]})");
  EXPECT_NE(report_error("[]x").find(": not JSON: "), std::string::npos);
  EXPECT_NE(report_error(R"({"traceEvents": {}})").find("t.json is not a Chrome trace"), std::string::npos);
  EXPECT_NE(report_error("7").find("t.json is not a Chrome trace"), std::string::npos);
}

// [memory] instants as Kineto writes them: the CPU's towards every range open around them on
// their thread (ends included) and the innermost's self, outside all ranges towards "[memory]";
// a device's are left out.
constexpr const char* kMemoryTrace = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::outer", "pid": 7, "tid": 1, "ts": 10.0, "dur": 40.0},
  {"ph": "X", "cat": "cpu_op", "name": "aten::inner", "pid": 7, "tid": 1, "ts": 20.0, "dur": 10.0},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": 1, "ts": 5.0,
   "args": {"Device Type": 0, "Device Id": -1, "Addr": 1, "Bytes": 64, "Total Allocated": 64, "Total Reserved": 0}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": 1, "ts": 15.0,
   "args": {"Device Type": 0, "Device Id": -1, "Addr": 2, "Bytes": 1000, "Total Allocated": 1064, "Total Reserved": 0}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": 1, "ts": 30.0,
   "args": {"Device Type": 0, "Device Id": -1, "Addr": 3, "Bytes": 400, "Total Allocated": 1464, "Total Reserved": 0}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": 1, "ts": 40.0,
   "args": {"Device Type": 1, "Device Id": 0, "Addr": 4, "Bytes": 9999, "Total Allocated": 9999, "Total Reserved": 0}},
  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": 2, "ts": 20.0,
   "args": {"Device Type": 0, "Device Id": -1, "Addr": 5, "Bytes": 8, "Total Allocated": 1472, "Total Reserved": 0}}
]})";

TEST(Report, MemoryEventsGiveTorchsCpuMemColumns) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "memory.json";
  std::ofstream(path) << kMemoryTrace;
  const OperatorTotalsTable table = totals_from_trace(path.string(), false);
  EXPECT_TRUE(table.shows_memory());
  std::map<std::string, OperatorTotals> rows;
  for (const OperatorTotals& row : table.rows({.sort = "cpu_memory_usage", .row_limit = 10, .group_by_shape = false}))
    rows[row.name] = row;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows["aten::outer"].cpu_memory_bytes, 1400);
  EXPECT_EQ(rows["aten::outer"].self_cpu_memory_bytes, 1000);
  EXPECT_EQ(rows["aten::inner"].cpu_memory_bytes, 400) << "an event at the end of a range is inside it";
  EXPECT_EQ(rows["aten::inner"].self_cpu_memory_bytes, 400);
  EXPECT_EQ(rows["[memory]"].cpu_memory_bytes, 72) << "outside every range, on either thread";
  EXPECT_EQ(rows["[memory]"].calls, 2u);
}

TEST(Report, AMemoryEventWithoutBytesIsAnError) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "memory.json";
  std::ofstream(path) << R"({"traceEvents": [{"ph": "i", "name": "[memory]", "pid": 7, "tid": 1, "ts": 5.0,
    "args": {"Bytes": "many"}}]})";
  EXPECT_THROW(totals_from_trace(path.string(), false), std::exception);
}

TEST(Report, MemoryReportReadsTheSummaryPastTheEvents) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "memory.json.gz";
  write_file(path, R"({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 1,
    "ts": 1.0, "dur": 2.0}], "tprof_summary": {"memory": {"allocations": 3, "frees": 1,
    "peak_allocated_bytes": 3145728, "allocated_at_end": 1024, "peak_holders": [{"bytes": 2097152,
    "blocks": 2, "op": "aten::mm", "stack": ["train.py(40): step", "train.py(80): main"]}],
    "live_from_earlier_cycles": [{"bytes": 512, "blocks": 1, "op": "", "stack": []}]}}})");
  const std::string text = memory_report_from_trace(path.string());
  EXPECT_NE(text.find("peak 3.00 Mb allocated"), std::string::npos) << text;
  EXPECT_NE(text.find("  2.00 Mb in 2 blocks: aten::mm at train.py(40): step <- train.py(80): main\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("  512 b in 1 blocks: outside every op\n"), std::string::npos) << text;
}

// torch.profiler's own trace of a compiled function: region 0/0 holds aten::sin (and the
// aten::empty inside it, not outermost); region 1/0, nested, holds aten::cos; aten::randn runs
// outside both, and a cache lookup ("TorchDynamo Cache Lookup", no "::") encloses nothing
// counted. The resume function's python_function names the graph break.
constexpr const char* kCompiledTrace = R"({"traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::randn", "pid": 7, "tid": 1, "ts": 0.0, "dur": 5.0},
  {"ph": "X", "cat": "cpu_op", "name": "TorchDynamo Cache Lookup", "pid": 7, "tid": 1, "ts": 6.0, "dur": 1.0},
  {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: 0/0", "pid": 7, "tid": 1, "ts": 8.0, "dur": 50.0},
  {"ph": "X", "cat": "cpu_op", "name": "aten::sin", "pid": 7, "tid": 1, "ts": 10.0, "dur": 10.0},
  {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 7, "tid": 1, "ts": 11.0, "dur": 1.0},
  {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: 1/0", "pid": 7, "tid": 1, "ts": 30.0, "dur": 20.0},
  {"ph": "X", "cat": "cpu_op", "name": "aten::cos", "pid": 7, "tid": 1, "ts": 31.0, "dur": 10.0},
  {"ph": "X", "cat": "python_function", "name": "t.py(4): torch_dynamo_resume_in_f_at_4", "pid": 7, "tid": 1,
   "ts": 30.0, "dur": 20.0}
]})";

TEST(Report, CompileSummaryOfATorchProfilerTrace) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "compiled.json";
  std::ofstream(path) << kCompiledTrace;
  const std::vector<std::string> lines = compile_summary_from_trace(path.string());
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "torch.compile: 2 graphs (of 2 frames), 2 graph calls; 2/3 ops (67%) and 80% of op time inside "
                      "compiled regions");
  EXPECT_EQ(lines[1], "  graph 0/0: 1 calls, 0.1 ms");
  EXPECT_EQ(lines[3], "  graph break: in f at t.py(4)");
  EXPECT_EQ(lines[5], "    aten::randn x1, 0.0 ms");
}

// tprof's trace: a recompile's wait counter names the guard that failed in its args.
TEST(Report, CompileSummaryReadsTheRecompileReasons) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "recompiled.json";
  std::ofstream(path) << R"({"traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "pytorch.wait_counter.dynamo_compile", "pid": 7, "tid": 1, "ts": 0.0,
   "dur": 5.0, "args": {"Recompile reason": "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16"}},
  {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: 0/1", "pid": 7, "tid": 1, "ts": 8.0, "dur": 50.0}
]})";
  const std::vector<std::string> lines = compile_summary_from_trace(path.string());
  const auto heading = std::find(lines.begin(), lines.end(), "  recompiled because (the guard that failed, as dynamo words it):");
  ASSERT_NE(heading, lines.end()) << ::testing::PrintToString(lines);
  ASSERT_NE(heading + 1, lines.end());
  EXPECT_EQ(*(heading + 1), "    0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16");
}

TEST(Report, CompileSummaryOfATraceWithoutRegionsIsEmpty) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "t.json";
  std::ofstream(path) << kTrace;
  EXPECT_TRUE(compile_summary_from_trace(path.string()).empty());
}

TEST(Report, MemoryReportOfATraceWithoutMemoryIsAnError) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "plain.json";
  std::ofstream(path) << kTrace;
  EXPECT_THROW(memory_report_from_trace(path.string()), std::exception);
  const auto array = scratch.path() / "array.json";
  std::ofstream(array) << R"([{"ph": "X", "name": "aten::mm", "pid": 7, "tid": 1, "ts": 1.0, "dur": 2.0}])";
  EXPECT_THROW(memory_report_from_trace(array.string()), std::exception);
}

}  // namespace
}  // namespace tprof
