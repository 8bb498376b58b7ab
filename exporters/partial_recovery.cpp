#include "exporters/partial_recovery.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exporters/chrome_trace_writer.h"
#include "exporters/execution_trace_writer.h"
#include "exporters/file_descriptor.h"
#include "exporters/output_file.h"

namespace tprof::exporters {
namespace {

constexpr size_t kChunkBytes = 1 << 20;
constexpr int kGzipOrZlibWindowBits = 15 + 32;  // inflate either header
constexpr uint64_t kNanosecondsPerMillisecond = 1'000'000;

// tprof's lines are short (at most 1.8 KB in a train_loop.py recording); the longest it can
// write are an op's with list arguments, PENDING_LISTS_MAX (4) lists of LIST_ELEMENTS_MAX
// (1024) tensors of up to 16 dims, about 1.5 MB. A longer line is not tprof's, and must not
// take memory without end (a gzip bomb of one line).
constexpr size_t kLineBytesMax = 16 << 20;
// Everything before the event list: a few hundred bytes, and paths.
constexpr size_t kHeaderBytesMax = 1 << 20;
// tprof writes gzip at level 1, 15:1 on its traces and ETs; a file that inflates to more than
// kInflationRatioMax times its size (plus a floor for small files) is not one of tprof's, and
// would otherwise fill the disk with the recovered copy.
constexpr uint64_t kInflationRatioMax = 100;
constexpr uint64_t kInflatedBytesFloor = 16 << 20;

[[noreturn]] void fail(const std::string& path, std::string_view reason) {
  throw std::runtime_error("cannot recover " + path + ": " + std::string(reason));
}


// The partial file, open and locked for the whole recovery. A running tprof holds the lock on
// each file it writes (OutputFile) until it ends, so recover never takes a file from under it;
// and two recovers of one file do not run at once.
class PartialFile {
 public:
  // O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: a link is refused.
  explicit PartialFile(const std::string& path)
      : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)) {
    if (fd_.get() < 0)
      fail(path, errno == ELOOP ? "it is a symbolic link; recover reads only regular files" : std::strerror(errno));
    struct stat status {};
    if (::fstat(fd_.get(), &status) != 0) fail(path, std::strerror(errno));
    if (!S_ISREG(status.st_mode))
      fail(path, "not a regular file (a device, directory, FIFO or socket); recover reads only regular files");
    size_ = static_cast<uint64_t>(status.st_size);
    // Only a lock held elsewhere refuses: a file system without locks leaves recover as it was.
    if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK)
      fail(path, "it is still being written by a running tprof (or read by another tprof recover); stop that "
                 "tprof and it finishes the file itself");
  }

  const std::string& path() const { return path_; }
  int fd() const { return fd_.get(); }
  uint64_t size() const { return size_; }

 private:
  const std::string& path_;
  FileDescriptor fd_;
  uint64_t size_ = 0;
};

// The partial file's bytes from its start, inflated if they are gzip, at most kChunkBytes at a
// time; a stream cut short ends where inflate runs out of input, which after the writer's sync
// flushes is at a flush boundary.
class PartialReader {
 public:
  explicit PartialReader(const PartialFile& file)
      : file_(file), inflated_max_(kInflatedBytesFloor + kInflationRatioMax * file.size()) {
    unsigned char magic[2] = {};
    gzip_ = ::pread(file_.fd(), magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gzip_ && inflateInit2(&inflater_, kGzipOrZlibWindowBits) != Z_OK) fail(file_.path(), "zlib inflateInit failed");
    raw_.resize(kChunkBytes);
    if (gzip_) inflated_.resize(kChunkBytes);
  }
  ~PartialReader() {
    if (gzip_) inflateEnd(&inflater_);
  }
  PartialReader(const PartialReader&) = delete;
  PartialReader& operator=(const PartialReader&) = delete;

  // Appends the next piece of text to `out`; false at the end.
  bool read(std::string& out) {
    while (!done_) {
      if (!gzip_) {
        const size_t count = read_raw();
        out.append(raw_.data(), count);
        done_ = count == 0;
        return count > 0;
      }
      if (const size_t count = inflate_some(); count > 0) {
        out.append(inflated_.data(), count);
        return true;
      }
    }
    return false;
  }

 private:
  // Inflates into inflated_; returns the bytes it holds, 0 when it needed more input or ended.
  size_t inflate_some() {
    if (inflater_.avail_in == 0 && !output_pending_) {
      const size_t count = read_raw();
      if (count == 0) {
        done_ = true;
        return 0;
      }
      inflater_.next_in = reinterpret_cast<Bytef*>(raw_.data());
      inflater_.avail_in = static_cast<uInt>(count);
    }
    inflater_.next_out = reinterpret_cast<Bytef*>(inflated_.data());
    inflater_.avail_out = static_cast<uInt>(inflated_.size());
    const int status = inflate(&inflater_, Z_NO_FLUSH);
    // A full buffer may leave output inside inflate with no input left to drive it.
    output_pending_ = inflater_.avail_out == 0;
    if (status != Z_OK && status != Z_BUF_ERROR) done_ = true;  // the end, or damage: keep what came before
    const size_t count = inflated_.size() - inflater_.avail_out;
    inflated_total_ += count;
    if (inflated_total_ > inflated_max_)
      fail(file_.path(), "it inflates past " + std::to_string(inflated_max_ >> 20) + " MiB, over " +
                             std::to_string(kInflationRatioMax) + " times its size: not tprof's");
    return count;
  }

  size_t read_raw() {
    for (;;) {
      const ssize_t count = ::pread(file_.fd(), raw_.data(), raw_.size(), static_cast<off_t>(offset_));
      if (count >= 0) {
        offset_ += static_cast<uint64_t>(count);
        return static_cast<size_t>(count);
      }
      if (errno != EINTR) fail(file_.path(), std::strerror(errno));
    }
  }

  const PartialFile& file_;
  const uint64_t inflated_max_;
  bool gzip_ = false;
  bool done_ = false;
  bool output_pending_ = false;
  uint64_t offset_ = 0;  // in the file: each reader reads it from the start
  uint64_t inflated_total_ = 0;
  z_stream inflater_{};
  std::string raw_;
  std::string inflated_;
};

// "123.456" (µs with 3 or more decimals) -> 123456 ns, rounded to the nearest ns: a float64-safe
// duration carries decimals beyond the ns ("219.6755") that read as its exact ns when rounded.
std::optional<uint64_t> microseconds_text_to_ns(std::string_view text) {
  uint64_t whole = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), whole);
  if (error != std::errc()) return std::nullopt;
  const char* const text_end = text.data() + text.size();
  const char* digit = end;
  if (digit < text_end && *digit == '.') ++digit;
  uint64_t fraction = 0;
  for (int place = 0; place < 3; ++place) {
    fraction *= 10;
    if (digit < text_end && *digit >= '0' && *digit <= '9') fraction += static_cast<uint64_t>(*digit++ - '0');
  }
  if (digit < text_end && *digit >= '5' && *digit <= '9') ++fraction;
  return whole * 1000 + fraction;
}

std::optional<uint64_t> number_after(std::string_view line, std::string_view key) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  return microseconds_text_to_ns(line.substr(at + key.size()));
}

std::optional<uint64_t> integer_after(std::string_view line, std::string_view key) {
  const size_t at = line.find(key);
  if (at == std::string_view::npos) return std::nullopt;
  uint64_t value = 0;
  const std::string_view rest = line.substr(at + key.size());
  if (std::from_chars(rest.data(), rest.data() + rest.size(), value).ec != std::errc()) return std::nullopt;
  return value;
}

// Which node ids an Execution Trace's kept lines define, and each thread's root. Nodes are
// written at their range's exit, so a range still open at the kill never was: its children
// then point at a node that does not exist, and are hung from their thread's root instead.
// The ids are kept sorted, 8 bytes a node whatever their values (a damaged line may hold any).
struct NodeIndex {
  std::vector<uint64_t> ids;
  std::unordered_map<uint64_t, uint64_t> root_by_logical_tid;

  void add(std::string_view line) {
    const auto id = integer_after(line, "{\"id\": ");
    if (!id) return;
    ids.push_back(*id);
    if (line.find("\"name\": \"[pytorch|profiler|execution_trace|thread]\"") != std::string_view::npos)
      if (const auto tid = integer_after(line, "{\"name\": \"tid\", \"type\": \"uint64\", \"value\": "))
        root_by_logical_tid[*tid] = *id;
  }
  void finish() { std::sort(ids.begin(), ids.end()); }
  bool has(uint64_t id) const { return std::binary_search(ids.begin(), ids.end(), id); }
};

// `line` with its ctrl_deps pointing at its thread's root when its parent was never written.
std::string with_existing_parent(std::string_view line, const NodeIndex& index) {
  constexpr std::string_view kKey = "\"ctrl_deps\": ";
  const auto parent = integer_after(line, kKey);
  if (!parent || index.has(*parent)) return std::string(line);
  const auto tid = integer_after(line, "{\"name\": \"tid\", \"type\": \"uint64\", \"value\": ");
  const auto root = tid ? index.root_by_logical_tid.find(*tid) : index.root_by_logical_tid.end();
  const uint64_t new_parent = root != index.root_by_logical_tid.end() ? root->second : 1;  // 1: the process root
  const size_t at = line.find(kKey) + kKey.size();
  const size_t end = line.find_first_not_of("0123456789", at);
  return std::string(line.substr(0, at)) + std::to_string(new_parent) + std::string(line.substr(end));
}

// The length of the well-formed UTF-8 sequence (RFC 3629, as JSON requires) at `text[at]`, 0 if
// it is not one.
size_t utf8_sequence_length(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return at + i < text.size() ? static_cast<unsigned char>(text[at + i]) : 0u; };
  const auto in = [](unsigned value, unsigned low, unsigned high) { return value >= low && value <= high; };
  const unsigned lead = byte(0);
  if (lead < 0x80) return 1;
  if (in(lead, 0xC2, 0xDF)) return in(byte(1), 0x80, 0xBF) ? 2 : 0;
  // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
  const unsigned low = lead == 0xE0 ? 0xA0 : lead == 0xF0 ? 0x90 : 0x80;
  const unsigned high = lead == 0xED ? 0x9F : lead == 0xF4 ? 0x8F : 0xBF;
  const size_t length = in(lead, 0xE0, 0xEF) ? 3 : in(lead, 0xF0, 0xF4) ? 4 : 0;
  if (length == 0 || !in(byte(1), low, high)) return 0;
  for (size_t i = 2; i < length; ++i)
    if (!in(byte(i), 0x80, 0xBF)) return 0;
  return length;
}

// `line`, or a copy in `repaired` with each byte that is not well-formed UTF-8 replaced by
// U+FFFD: tprof copies strings from the target (names, paths) as they are, and a JSON reader
// rejects the whole file over one such byte.
std::string_view as_utf8(std::string_view line, std::string& repaired) {
  size_t at = 0;
  for (size_t length; at < line.size() && (length = utf8_sequence_length(line, at)) > 0;) at += length;
  if (at == line.size()) return line;
  repaired.assign(line.substr(0, at));
  while (at < line.size()) {
    const size_t length = utf8_sequence_length(line, at);
    repaired += length > 0 ? line.substr(at, length) : "\xEF\xBF\xBD";
    at += std::max<size_t>(length, 1);
  }
  return repaired;
}

// Whether `text` is JSON with no NUL byte in it: nlohmann's lexer takes a NUL for the end of
// the input, so accept() alone passes a valid prefix followed by a NUL and anything at all
// (found by fuzz_recover_trace).
bool is_json(std::string_view text) { return text.find('\0') == std::string_view::npos && nlohmann::json::accept(text); }

// Whether `text` is one JSON object, as the writer writes an event or node (indented).
bool is_json_object(std::string_view text) {
  const size_t start = text.find_first_not_of(' ');
  return start != std::string_view::npos && text[start] == '{' && is_json(text);
}

// What the lines seen so far say about the file, and where the copy stands.
struct Recovery {
  enum class Kind { kUnknown, kChromeTrace, kExecutionTrace } kind = Kind::kUnknown;
  bool in_events = false;
  bool events_ended = false;
  std::string header;     // the lines before the events, to check that they are valid JSON
  uint64_t line_number = 0;
  uint64_t events = 0;
  uint64_t dropped = 0;   // event lines that were not JSON objects
  uint64_t repaired = 0;  // lines kept with their invalid UTF-8 replaced
  uint64_t base_time_ns = 0;
  uint64_t start_ts_ms = 0;
  uint64_t first_start_relative_ns = UINT64_MAX;  // Chrome: the earliest start among the kept events
  uint64_t last_end_relative_ns = 0;              // Chrome: the latest end among the kept events
  uint64_t pid = 0;
  uint64_t largest_record_id = 0;
  bool has_step = false;  // a ProfilerStep annotation was kept
};

// A header line; at the event list's opening, the header must be JSON that the events and the
// ending complete: a damaged one cannot be mended.
void take_header_line(const std::string& path, std::string_view line, Recovery& recovery) {
  using Kind = Recovery::Kind;
  if (line.starts_with("  \"schemaVersion\": ")) recovery.kind = Kind::kChromeTrace;
  if (line.starts_with("  \"schema\": ")) {
    recovery.kind = Kind::kExecutionTrace;
    recovery.start_ts_ms = integer_after(line, "\"start_ts\": ").value_or(0);
  }
  if (const auto base = integer_after(line, "\"baseTimeNanoseconds\": ")) recovery.base_time_ns = *base;
  recovery.header.append(line).append("\n");
  if (recovery.header.size() > kHeaderBytesMax)
    fail(path, "no event list in its first " + std::to_string(kHeaderBytesMax >> 20) + " MiB: not tprof's");
  recovery.in_events = line == "  \"traceEvents\": [" || line == "  \"nodes\": [";
  if (recovery.in_events && recovery.kind != Kind::kUnknown && !is_json(recovery.header + "]}"))
    fail(path, "its header (lines 1 to " + std::to_string(recovery.line_number) + ") is damaged: not valid JSON");
}

void take_chrome_event(std::string_view line, Recovery& recovery) {
  if (!line.starts_with("  {\"ph\": \"X\"")) return;
  if (const auto ts = number_after(line, "\"ts\": ")) {
    recovery.first_start_relative_ns = std::min(recovery.first_start_relative_ns, *ts);
    recovery.last_end_relative_ns = std::max(recovery.last_end_relative_ns, *ts + number_after(line, "\"dur\": ").value_or(0));
  }
  recovery.pid = integer_after(line, "\"pid\": ").value_or(recovery.pid);
  recovery.largest_record_id = std::max(recovery.largest_record_id, integer_after(line, "\"External id\": ").value_or(0));
  recovery.has_step = recovery.has_step || line.find("\"name\": \"ProfilerStep#") != std::string_view::npos;
}

enum class Verdict { kHeader, kEvent, kSkipped };

// Whether `line` (without its newline, its UTF-8 made valid) is kept, as header or event.
Verdict take_line(const std::string& path, std::string_view line, Recovery& recovery) {
  ++recovery.line_number;
  if (recovery.events_ended) return Verdict::kSkipped;
  if (!recovery.in_events) {
    take_header_line(path, line, recovery);
    return Verdict::kHeader;
  }
  // The writer's own ending, when it got that far: its last event, with no comma (recover
  // writes an ending of its own), then "  ],".
  if (line == "  ],") {
    recovery.events_ended = true;
    return Verdict::kSkipped;
  }
  if (!line.ends_with(",")) {
    recovery.dropped += !is_json_object(line);  // an object: the writer's last event
    return Verdict::kSkipped;
  }
  if (!is_json_object(line.substr(0, line.size() - 1))) {
    ++recovery.dropped;
    return Verdict::kSkipped;
  }
  ++recovery.events;
  if (recovery.kind == Recovery::Kind::kChromeTrace) take_chrome_event(line, recovery);
  return Verdict::kEvent;
}

std::string float64_safe_duration(int64_t start_ns, int64_t end_ns) {
  std::string text;
  append_float64_safe_duration(text, start_ns, end_ns);
  return text;
}

// The step annotation closes last, so a killed tprof never wrote it; HTA, Chakra and the
// TensorBoard step view need one. It covers the kept events on the main thread (tid == pid),
// with a record id no kept event has.
std::string recovered_step(const Recovery& recovery) {
  const std::string pid = std::to_string(recovery.pid);
  const std::string record_id = std::to_string(recovery.largest_record_id + 1);
  const auto start_ns = static_cast<int64_t>(recovery.first_start_relative_ns);
  const auto end_ns = static_cast<int64_t>(recovery.last_end_relative_ns);
  return "  {\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#0\", \"pid\": " + pid +
         ", \"tid\": " + pid + ", \"ts\": " + format_relative_us(start_ns) +
         ", \"dur\": " + float64_safe_duration(start_ns, end_ns) + ", \"args\": {\"External id\": " + record_id +
         ", \"Record function id\": " + record_id + ", \"tprof: recovered\": true}},\n";
}

uint64_t modification_time_ms(const std::string& path) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) return 0;
  return static_cast<uint64_t>(status.st_mtim.tv_sec) * 1000 + static_cast<uint64_t>(status.st_mtim.tv_nsec) / kNanosecondsPerMillisecond;
}

// Calls `visit` with every complete line (without its newline, its UTF-8 made valid) of the
// partial file, and whether its UTF-8 was repaired, until it returns false.
template <typename Visit>
void for_each_line(const PartialFile& file, Visit visit) {
  PartialReader reader(file);
  std::string text;
  std::string repaired;
  size_t line_start = 0;
  uint64_t line_number = 1;  // of the unfinished line
  while (reader.read(text)) {
    for (size_t newline; (newline = text.find('\n', line_start)) != std::string::npos; line_start = newline + 1) {
      ++line_number;
      const std::string_view line(text.data() + line_start, newline - line_start);
      const std::string_view valid = as_utf8(line, repaired);
      if (!visit(valid, valid.data() != line.data())) return;
    }
    text.erase(0, line_start);  // keep the unfinished line for the next piece
    line_start = 0;
    if (text.size() > kLineBytesMax)
      fail(file.path(), "line " + std::to_string(line_number) + " is longer than " +
                            std::to_string(kLineBytesMax >> 20) + " MiB: not tprof's");
  }
}

}  // namespace

RecoveredFile recover_partial_file(const std::string& partial_path, mode_t mode) {
  constexpr std::string_view kSuffix = OutputFile::kPartialSuffix;
  if (!partial_path.ends_with(kSuffix)) fail(partial_path, "not a " + std::string(kSuffix) + " file");
  const std::string final_path = partial_path.substr(0, partial_path.size() - kSuffix.size());
  struct stat existing {};
  if (::lstat(final_path.c_str(), &existing) == 0) fail(partial_path, final_path + " already exists");
  const PartialFile file(partial_path);

  // A first pass learns what the file is from its header and, for an ET only, reads on to
  // learn which nodes it holds.
  Recovery survey;
  NodeIndex nodes;
  for_each_line(file, [&](std::string_view line, bool) {
    const Verdict verdict = take_line(partial_path, line, survey);
    if (!survey.in_events) return true;
    if (survey.kind != Recovery::Kind::kExecutionTrace) return false;
    if (verdict == Verdict::kEvent) nodes.add(line);
    return true;
  });
  if (survey.kind == Recovery::Kind::kUnknown) fail(partial_path, "neither a tprof trace nor its Execution Trace");
  if (!survey.in_events) fail(partial_path, "it ends inside its header: nothing was recorded");
  nodes.finish();
  const bool execution_trace = survey.kind == Recovery::Kind::kExecutionTrace;

  // What a recover killed before it finished left; the lock on the partial file shows that no
  // other recover is writing it now.
  constexpr std::string_view kTempSuffix = ".recovering";
  ::unlink((final_path + std::string(kTempSuffix)).c_str());
  OutputFile output(final_path, {.mode = mode, .temp_suffix = kTempSuffix, .keep_on_failure = false});
  Recovery recovery;
  for_each_line(file, [&](std::string_view line, bool repaired) {
    const Verdict verdict = take_line(partial_path, line, recovery);
    if (verdict == Verdict::kSkipped) return true;
    recovery.repaired += repaired;
    output.write(execution_trace && verdict == Verdict::kEvent ? with_existing_parent(line, nodes) : std::string(line));
    output.write("\n");
    return true;
  });

  RecoveredFile recovered{final_path, execution_trace, recovery.events, recovery.dropped, recovery.repaired};
  if (execution_trace) {
    const uint64_t finish_ms = std::max(recovery.start_ts_ms, modification_time_ms(partial_path));
    output.write(execution_trace_tail(finish_ms, /*recovered=*/true));
  } else {
    if (!recovery.has_step && recovery.first_start_relative_ns != UINT64_MAX) output.write(recovered_step(recovery));
    model::RunSummary summary;
    summary.window_end_unix_ns = recovery.base_time_ns + recovery.last_end_relative_ns;
    summary.recovered = true;
    // The GPUs' properties were to be written at the end, which the partial file never reached.
    output.write(chrome_trace_tail(static_cast<int64_t>(recovery.last_end_relative_ns), summary, /*devices=*/{},
                                   chrome_trace_name(final_path)));
  }
  output.commit();
  if (::unlink(partial_path.c_str()) != 0) fail(partial_path, std::string("recovered, but not removed: ") + std::strerror(errno));
  return recovered;
}

}  // namespace tprof::exporters
