// `tprof recover`: a partial trace or Execution Trace, as a killed tprof leaves it (flushed up to
// some point, maybe with a torn line or a cut gzip stream after it), becomes a valid file with
// every complete event, marked recovered; and what recover must refuse.
#include "exporters/partial_recovery.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>

#include "exporters/chrome_trace_writer.h"
#include "exporters/execution_trace_writer.h"
#include "exporters/output_file.h"
#include "model/trace_model.h"
#include "tests/support/trace_validator.h"

namespace tprof::exporters {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kWindowStartNs = 1'751'410'837'000'000'250;
constexpr uint32_t kPid = 4242;
const model::Operator kAdd{"aten::add", "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string inflate_file(const fs::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  std::string text;
  char chunk[1 << 16];
  for (int read; (read = gzread(file, chunk, sizeof chunk)) > 0;) text.append(chunk, read);
  gzclose(file);
  return text;
}

// Every third op's parent is a range still open at the kill (record id 1000, never written).
model::OpSpan op_span(uint64_t index) {
  model::OpSpan span;
  span.start_ns = kWindowStartNs + 1'000 + index * 1'000;
  span.end_ns = span.start_ns + 500;
  span.record_id = index + 2;
  if (index % 3 == 0) span.parent_record_id = 1000;
  return span;
}

class PartialRecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tprof_recovery_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    directory_ = pattern;
  }
  void TearDown() override { fs::remove_all(directory_); }

  // Streams `flushed` ops through `writer` and flushes, then `unflushed` more and flushes again;
  // copies the partial file as it was after the first flush (and, with `torn_tail`, with the
  // first bytes of the second flush after it, cut mid-way) to `left_behind`, as a kill leaves it.
  template <typename Writer>
  void leave_partial(const std::string& file_name, int flushed, int unflushed, size_t torn_tail,
                     const fs::path& left_behind) {
    const fs::path path = directory_ / "writing" / file_name;
    fs::create_directories(path.parent_path());
    OutputFile out(path.string());
    Writer writer = make_writer<Writer>(out, file_name);
    writer.begin({.pid = kPid, .process_name = "python3", .window_start_unix_ns = kWindowStartNs});
    writer.thread({kPid, "python3", 1});
    for (int i = 0; i < flushed; ++i) writer.op({kPid, op_span(i), kAdd, nullptr});
    writer.flush();
    const std::string first = read_file(out.temp_path());
    for (int i = flushed; i < flushed + unflushed; ++i) writer.op({kPid, op_span(i), kAdd, nullptr});
    writer.flush();
    const std::string second = read_file(out.temp_path());
    ASSERT_GT(second.size(), first.size() + torn_tail);
    std::ofstream(left_behind, std::ios::binary) << second.substr(0, first.size() + torn_tail);
  }

  template <typename Writer>
  static Writer make_writer(OutputFile& out, const std::string& file_name) {
    if constexpr (std::is_same_v<Writer, ChromeTraceWriter>) {
      return Writer(out, file_name);
    } else {
      return Writer(out);
    }
  }

  fs::path directory_;
};

TEST_F(PartialRecoveryTest, APlainTraceKeepsEveryCompleteEventAndDropsTheTornOne) {
  const fs::path partial = directory_ / "x.pt.trace.json.partial";
  leave_partial<ChromeTraceWriter>("x.pt.trace.json", 40, 40, 57, partial);
  const RecoveredFile recovered = recover_partial_file(partial.string(), 0600);
  EXPECT_EQ(recovered.path, (directory_ / "x.pt.trace.json").string());
  EXPECT_FALSE(recovered.execution_trace);
  EXPECT_FALSE(fs::exists(partial)) << "the partial file is removed once recovered";
  EXPECT_EQ(fs::status(recovered.path).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write);

  const std::string text = read_file(recovered.path);
  const std::vector<std::string> violations = test::validate_trace_text(text);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations.front();
  const json document = json::parse(text);
  size_t ops = 0;
  std::vector<json> steps;
  for (const json& event : document.at("traceEvents")) {
    if (event.value("cat", "") == "cpu_op") ++ops;
    if (event.value("cat", "") == "user_annotation") steps.push_back(event);
  }
  EXPECT_EQ(ops, 40u) << "the flushed ops; the torn one after them is dropped";
  EXPECT_EQ(recovered.events, 40u + 5u);  // and the five process and thread rows
  EXPECT_EQ(document.at("tprof_summary").at("recovered"), true);
  EXPECT_EQ(document.at("tprof_summary").at("window_end_unix_ns").get<uint64_t>(), op_span(39).end_ns)
      << "the window ends with the last event kept";
  // The step closes at the end, so it never reached the file; recover puts one over the ops.
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].at("name"), "ProfilerStep#0");
  EXPECT_EQ(steps[0].at("tid"), kPid);
  EXPECT_EQ(steps[0].at("args").at("External id"), 42) << "a record id no kept op has";
  EXPECT_EQ(steps[0].at("args").at("tprof: recovered"), true);
  EXPECT_EQ(document.at("traceName"), "x.pt.trace.json");
  EXPECT_EQ(document.at("tprof").at("window_start_unix_ns").get<uint64_t>(), kWindowStartNs);
}

// The recovered step covers the kept ops as float64 readers see them too: an op whose duration
// was written with decimals beyond the ns (chrome_trace_writer.h append_float64_safe_duration)
// and that ends last must still end inside it.
TEST_F(PartialRecoveryTest, TheRecoveredStepEnclosesAFloat64SafeDurationThatEndsLast) {
  const uint64_t base_ns = chrome_trace_base_time_ns(kWindowStartNs);
  // An op 80 days into the base time's quantum (ts ~ 6.9e12 µs, where a double resolves ~1 ns)
  // whose duration needs the extra decimals.
  model::OpSpan last = op_span(10);
  last.start_ns = base_ns + 80ULL * 86'400'000'000'000 + 123;
  for (uint64_t duration = 500;; ++duration) {
    std::string text;
    append_float64_safe_duration(text, static_cast<int64_t>(last.start_ns - base_ns),
                                 static_cast<int64_t>(last.start_ns + duration - base_ns));
    if (text.size() > text.find('.') + 4) {
      last.end_ns = last.start_ns + duration;
      break;
    }
    ASSERT_LT(duration, 100'000u) << "no duration needed more decimals";
  }
  const fs::path path = directory_ / "writing" / "y.pt.trace.json";
  fs::create_directories(path.parent_path());
  OutputFile out(path.string());
  ChromeTraceWriter writer(out, "y.pt.trace.json");
  writer.begin({.pid = kPid, .process_name = "python3", .window_start_unix_ns = kWindowStartNs});
  writer.thread({kPid, "python3", 1});
  for (int i = 0; i < 5; ++i) writer.op({kPid, op_span(i), kAdd, nullptr});
  writer.op({kPid, last, kAdd, nullptr});
  writer.flush();
  const fs::path partial = directory_ / "y.pt.trace.json.partial";
  std::ofstream(partial, std::ios::binary) << read_file(out.temp_path());

  const RecoveredFile recovered = recover_partial_file(partial.string(), 0600);
  const std::string text = read_file(recovered.path);
  const std::vector<std::string> violations = test::validate_trace_text(text);
  EXPECT_TRUE(violations.empty()) << violations.size() << " violations, first: " << violations.front();
}

TEST_F(PartialRecoveryTest, ACutGzipTraceInflatesUpToItsLastFlush) {
  const fs::path partial = directory_ / "x.pt.trace.json.gz.partial";
  leave_partial<ChromeTraceWriter>("x.pt.trace.json.gz", 300, 300, 200, partial);
  const RecoveredFile recovered = recover_partial_file(partial.string(), 0640);
  EXPECT_EQ(recovered.path, (directory_ / "x.pt.trace.json.gz").string());
  EXPECT_EQ(fs::status(recovered.path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  const std::string text = inflate_file(recovered.path);
  EXPECT_TRUE(test::validate_trace_text(text).empty());
  const json document = json::parse(text);
  size_t ops = 0;
  for (const json& event : document.at("traceEvents")) ops += event.at("ph") == "X";
  EXPECT_GE(ops, 300u) << "everything up to the last complete flush";
  EXPECT_LT(ops, 600u) << "the second flush was cut";
  EXPECT_EQ(document.at("tprof_summary").at("recovered"), true);
}

TEST_F(PartialRecoveryTest, AnExecutionTraceEndsWithItsProcessRoot) {
  const fs::path partial = directory_ / "x.et.json.partial";
  leave_partial<ExecutionTraceWriter>("x.et.json", 10, 10, 33, partial);
  const RecoveredFile recovered = recover_partial_file(partial.string(), 0600);
  EXPECT_TRUE(recovered.execution_trace);
  const json document = json::parse(read_file(recovered.path));
  const json& nodes = document.at("nodes");
  ASSERT_EQ(nodes.size(), 1u + 10u + 1u);  // the thread root, ten ops, the process root
  EXPECT_EQ(nodes.back().at("id"), 1);
  EXPECT_EQ(nodes.back().at("name"), "[pytorch|profiler|execution_trace|process]");
  std::set<uint64_t> ids;
  for (const json& node : nodes) ids.insert(node.at("id").get<uint64_t>());
  const uint64_t thread_root = nodes.front().at("id").get<uint64_t>();
  EXPECT_EQ(nodes.front().at("name"), "[pytorch|profiler|execution_trace|thread]");
  for (const json& node : nodes) EXPECT_TRUE(ids.contains(node.at("ctrl_deps").get<uint64_t>())) << node.dump();
  // The ops whose parent was never written hang from their thread's root.
  EXPECT_EQ(nodes[1].at("ctrl_deps").get<uint64_t>(), thread_root) << nodes[1].dump();
  EXPECT_EQ(document.at("tprof_recovered"), true);
  EXPECT_GE(document.at("finish_ts").get<uint64_t>(), document.at("start_ts").get<uint64_t>());
}

TEST_F(PartialRecoveryTest, RefusesWhatItCannotRecover) {
  auto reason = [](const std::string& path) -> std::string {
    try {
      recover_partial_file(path, 0600);
    } catch (const std::runtime_error& error) {
      return error.what();
    }
    return "";
  };
  std::ofstream(directory_ / "notes.txt") << "hello";
  EXPECT_NE(reason((directory_ / "notes.txt").string()).find("not a .partial file"), std::string::npos);

  std::ofstream(directory_ / "other.json.partial") << "{\n  \"something\": 1,\n";
  EXPECT_NE(reason((directory_ / "other.json.partial").string()).find("neither a tprof trace"), std::string::npos);

  std::ofstream(directory_ / "early.pt.trace.json.partial") << "{\n  \"schemaVersion\": 1,\n  \"deviceProp";
  EXPECT_NE(reason((directory_ / "early.pt.trace.json.partial").string()).find("header"), std::string::npos);
  EXPECT_FALSE(fs::exists(directory_ / "early.pt.trace.json"));

  const fs::path partial = directory_ / "y.pt.trace.json.partial";
  leave_partial<ChromeTraceWriter>("y.pt.trace.json", 5, 5, 0, partial);
  std::ofstream(directory_ / "y.pt.trace.json") << "someone's file";
  EXPECT_NE(reason(partial.string()).find("already exists"), std::string::npos);
  EXPECT_EQ(read_file(directory_ / "y.pt.trace.json"), "someone's file");
  EXPECT_TRUE(fs::exists(partial));
}

std::string recover_error(const fs::path& path) {
  try {
    recover_partial_file(path.string(), 0600);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "";
}

// A tprof still recording holds a lock on its .partial file; recover must refuse it rather
// than delete it from under the recording.
TEST_F(PartialRecoveryTest, RefusesAFileARunningTprofIsStillWriting) {
  for (const std::string name : {"live.pt.trace.json", "live.pt.trace.json.gz"}) {
    const fs::path path = directory_ / name;
    OutputFile out(path.string());
    ChromeTraceWriter writer(out, name);
    writer.begin({.pid = kPid, .process_name = "python3", .window_start_unix_ns = kWindowStartNs});
    for (int i = 0; i < 20; ++i) writer.op({kPid, op_span(i), kAdd, nullptr});
    writer.flush();
    const std::string error = recover_error(out.temp_path());
    EXPECT_NE(error.find("is still being written by a running tprof"), std::string::npos) << error;
    EXPECT_TRUE(fs::exists(out.temp_path())) << "the recording's file was taken from under it";
    EXPECT_FALSE(fs::exists(path));
  }
}

// The node index holds the ids of the nodes kept, however large: a damaged or hostile line
// with id 2^64-1 once overflowed a bitmap sized id + 1, and id 2e9 took 248 MB.
TEST_F(PartialRecoveryTest, AnyNodeIdIsIndexedWithoutMemoryForItsValue) {
  const fs::path partial = directory_ / "ids.et.json.partial";
  leave_partial<ExecutionTraceWriter>("ids.et.json", 10, 10, 0, partial);
  std::string text = read_file(partial);
  const size_t node = text.find("  {\"id\": ", text.find("\"nodes\": ["));
  const size_t node_end = text.find('\n', node) + 1;
  const size_t id_start = node + std::strlen("  {\"id\": ");
  const size_t id_end = text.find(',', id_start);
  const std::string line = text.substr(node, node_end - node);
  for (const std::string id : {"18446744073709551615", "2000000000", "4000000000"}) {
    std::string copy = line;
    copy.replace(id_start - node, id_end - id_start, id);
    text += copy;
  }
  std::ofstream(partial, std::ios::binary) << text;

  rusage before{};
  getrusage(RUSAGE_SELF, &before);
  const RecoveredFile recovered = recover_partial_file(partial.string(), 0600);
  rusage after{};
  getrusage(RUSAGE_SELF, &after);
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 20 * 1024) << "KiB more at the peak, for 3 large ids";
  const json nodes = json::parse(read_file(recovered.path)).at("nodes");
  std::set<uint64_t> ids;
  for (const json& node : nodes) ids.insert(node.at("id").get<uint64_t>());
  EXPECT_TRUE(ids.contains(UINT64_MAX));
  EXPECT_TRUE(ids.contains(2'000'000'000));
}

// Only a regular file is read: a FIFO once hung recover in open(), a device was read without
// end, and a link is not followed.
TEST_F(PartialRecoveryTest, RefusesWhatIsNotARegularFile) {
  const fs::path fifo = directory_ / "fifo.pt.trace.json.partial";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::future<std::string> reason = std::async(std::launch::async, [&] { return recover_error(fifo); });
  if (reason.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "recover hangs on a FIFO";
    ::close(::open(fifo.c_str(), O_WRONLY | O_NONBLOCK));  // lets its open() return
  }
  EXPECT_NE(reason.get().find("not a regular file"), std::string::npos);

  const fs::path device = directory_ / "zero.pt.trace.json.partial";
  if (mknod(device.c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0) {  // /dev/zero's numbers
    const std::string error = recover_error(device);
    EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
  }

  const fs::path target = directory_ / "real.pt.trace.json.partial";
  leave_partial<ChromeTraceWriter>("real.pt.trace.json", 5, 5, 0, target);
  const fs::path link = directory_ / "link.pt.trace.json.partial";
  fs::create_symlink(target, link);
  EXPECT_NE(recover_error(link).find("symbolic link"), std::string::npos);
  EXPECT_TRUE(fs::exists(target));
}

// No line of tprof's comes near 16 MiB; a longer one is refused before it takes the memory.
TEST_F(PartialRecoveryTest, RefusesALineLongerThanTprofWrites) {
  const fs::path partial = directory_ / "long.pt.trace.json.partial";
  leave_partial<ChromeTraceWriter>("long.pt.trace.json", 5, 5, 0, partial);
  std::ofstream(partial, std::ios::binary | std::ios::app) << "  {\"name\": \"" << std::string(17 << 20, 'x');
  const std::string error = recover_error(partial);
  EXPECT_NE(error.find("is longer than 16 MiB"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(directory_ / "long.pt.trace.json"));
}

// A small gzip file that inflates far past what tprof's level-1 output does is refused, and
// its recovered copy so far removed, rather than filling the disk.
TEST_F(PartialRecoveryTest, RefusesAGzipFileThatInflatesFarPastItsSize) {
  const fs::path partial = directory_ / "bomb.pt.trace.json.gz.partial";
  leave_partial<ChromeTraceWriter>("bomb.pt.trace.json", 5, 5, 0, directory_ / "bomb.plain");
  gzFile file = gzopen(partial.c_str(), "wb9");
  const std::string header = read_file(directory_ / "bomb.plain");
  gzwrite(file, header.data(), static_cast<unsigned>(header.size()));
  std::string events;
  while (events.size() < (8 << 20)) events += "  {\"ph\": \"i\"},\n";
  for (int i = 0; i < 8; ++i) gzwrite(file, events.data(), static_cast<unsigned>(events.size()));  // 64 MiB
  gzclose(file);
  ASSERT_LT(fs::file_size(partial), 256u << 10);
  const std::string error = recover_error(partial);
  EXPECT_NE(error.find("it inflates past"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(directory_ / "bomb.pt.trace.json.gz"));
  EXPECT_FALSE(fs::exists(directory_ / "bomb.pt.trace.json.gz.recovering"));
}

// A damaged event line (here: not JSON) is dropped and counted, the events after it kept; bytes
// that are not UTF-8 become U+FFFD. The output is valid JSON.
TEST_F(PartialRecoveryTest, DropsDamagedLinesAndReplacesInvalidUtf8) {
  const fs::path partial = directory_ / "damaged.pt.trace.json.partial";
  leave_partial<ChromeTraceWriter>("damaged.pt.trace.json", 40, 40, 0, partial);
  std::string text = read_file(partial);
  const size_t first = text.find("\"name\": \"aten::add\"");
  text.replace(first + 10, 1, "\xFF");                        // in a name: replaced
  text.replace(text.find("\"ts\": ", text.find('\n', first)), 1, "'");  // in syntax: dropped
  std::ofstream(partial, std::ios::binary) << text;
  const RecoveredFile recovered = recover_partial_file(partial.string(), 0600);
  EXPECT_EQ(recovered.dropped, 1u);
  EXPECT_EQ(recovered.repaired, 1u);
  const json document = json::parse(read_file(recovered.path));
  size_t ops = 0;
  for (const json& event : document.at("traceEvents")) ops += event.value("cat", "") == "cpu_op";
  EXPECT_EQ(ops, 39u) << "every op but the damaged one";
  EXPECT_NE(read_file(recovered.path).find("a\xEF\xBF\xBD" "en::add"), std::string::npos);
}

// A recover killed mid-way leaves "<file>.recovering"; the next recover of the same partial
// file (which it has locked, so no other recover is writing) replaces it.
TEST_F(PartialRecoveryTest, ReplacesTheCopyAKilledRecoverLeft) {
  const fs::path partial = directory_ / "again.pt.trace.json.partial";
  leave_partial<ChromeTraceWriter>("again.pt.trace.json", 5, 5, 0, partial);
  std::ofstream(directory_ / "again.pt.trace.json.recovering") << "half a copy";
  const RecoveredFile recovered = recover_partial_file(partial.string(), 0600);
  EXPECT_TRUE(test::validate_trace_text(read_file(recovered.path)).empty());
  EXPECT_FALSE(fs::exists(directory_ / "again.pt.trace.json.recovering"));
}

// Real partial files (tests/fuzz/corpus/*/killed.*: tprof attached to tests/workloads/train_loop.py
// and killed), each with one bit flipped, many times over: each recovers into valid JSON, or is
// refused with nothing written. Flipped in the text (gzip files re-compressed) and, for gzip
// files, in the compressed bytes.
TEST_F(PartialRecoveryTest, EveryBitFlippedRealPartialRecoversIntoValidJsonOrNothing) {
  constexpr int kFlipsPerFile = 150;
  std::mt19937_64 random(20261126);
  size_t recovered_count = 0;
  size_t refused_count = 0;
  std::vector<std::string> invalid;
  for (const std::string kind : {"recover_trace", "recover_et"}) {
    for (const auto& entry : fs::directory_iterator(fs::path(TPROF_SOURCE_DIR) / "tests/fuzz/corpus" / kind)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with("killed.")) continue;  // the fuzz targets' other seeds are small or odd on purpose
      const bool gzip = name.ends_with(".gz.partial");
      const std::string original = gzip ? inflate_file(entry.path()) : read_file(entry.path());
      const std::string compressed = read_file(entry.path());
      ASSERT_GT(original.size(), 1000u) << name;
      fs::copy_file(entry.path(), directory_ / name);
      const uint64_t unflipped_events = recover_partial_file((directory_ / name).string(), 0600).events;
      fs::remove(directory_ / name.substr(0, name.size() - 8));
      EXPECT_GT(unflipped_events, 20u) << name;
      for (int flip = 0; flip < kFlipsPerFile * (gzip ? 2 : 1); ++flip) {
        const bool in_text = flip < kFlipsPerFile;
        std::string bytes = in_text ? original : compressed;
        bytes[random() % bytes.size()] ^= static_cast<char>(1 << (random() % 8));
        const fs::path partial = directory_ / name;
        if (in_text && gzip) {
          gzFile file = gzopen(partial.c_str(), "wb1");
          gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size()));
          gzclose(file);
        } else {
          std::ofstream(partial, std::ios::binary) << bytes;
        }
        std::string recovered_path;
        try {
          const RecoveredFile recovered = recover_partial_file(partial.string(), 0600);
          recovered_path = recovered.path;
          // One flip costs an event, two where it joins two lines; a flip in the compressed
          // bytes may cut the stream.
          if (in_text) {
            EXPECT_GE(recovered.events + 2, unflipped_events) << name << " flip " << flip;
          }
        } catch (const std::runtime_error& error) {
          ++refused_count;
          EXPECT_FALSE(fs::exists(directory_ / name.substr(0, name.size() - 8))) << error.what();
          fs::remove(partial);
          continue;
        }
        ++recovered_count;
        const std::string text = gzip ? inflate_file(recovered_path) : read_file(recovered_path);
        if (!json::accept(text)) {
          invalid.push_back(name + " flip " + std::to_string(flip));
          fs::rename(recovered_path, directory_ / ("invalid_" + std::to_string(invalid.size())));
        } else {
          fs::remove(recovered_path);
        }
      }
    }
  }
  std::cout << recovered_count << " recovered, " << refused_count << " refused, " << invalid.size()
            << " recovered into invalid JSON\n";
  EXPECT_GT(recovered_count, 0u);
  EXPECT_TRUE(invalid.empty()) << invalid.size() << " invalid, first: " << invalid.front();
}

}  // namespace
}  // namespace tprof::exporters
