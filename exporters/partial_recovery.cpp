#include "exporters/partial_recovery.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "exporters/chrome_trace_writer.h"
#include "exporters/execution_trace_writer.h"
#include "exporters/output_file.h"

namespace tprof::exporters {
namespace {

constexpr size_t kChunkBytes = 1 << 20;
constexpr int kGzipOrZlibWindowBits = 15 + 32;  // inflate either header
constexpr uint64_t kNanosecondsPerMillisecond = 1'000'000;

[[noreturn]] void fail(const std::string& path, std::string_view reason) {
  throw std::runtime_error("cannot recover " + path + ": " + std::string(reason));
}

// The partial file's bytes, inflated if they are gzip; a stream cut short ends where inflate
// runs out of input, which after the writer's sync flushes is at a flush boundary.
class PartialReader {
 public:
  explicit PartialReader(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd_ < 0) fail(path, std::strerror(errno));
    unsigned char magic[2] = {};
    gzip_ = ::pread(fd_, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    if (gzip_ && inflateInit2(&inflater_, kGzipOrZlibWindowBits) != Z_OK) {
      ::close(fd_);
      fail(path, "zlib inflateInit failed");
    }
    raw_.resize(kChunkBytes);
  }
  ~PartialReader() {
    if (gzip_) inflateEnd(&inflater_);
    ::close(fd_);
  }
  PartialReader(const PartialReader&) = delete;
  PartialReader& operator=(const PartialReader&) = delete;

  // Appends the next piece of text to `out`; false at the end.
  bool read(std::string& out) {
    if (done_) return false;
    const ssize_t count = read_raw();
    if (count == 0) {
      done_ = true;
      return false;
    }
    if (!gzip_) {
      out.append(raw_.data(), static_cast<size_t>(count));
      return true;
    }
    inflater_.next_in = reinterpret_cast<Bytef*>(raw_.data());
    inflater_.avail_in = static_cast<uInt>(count);
    char inflated[kChunkBytes / 4];
    // Until the input is used up and inflate had room to spare (so nothing it holds back waits).
    do {
      inflater_.next_out = reinterpret_cast<Bytef*>(inflated);
      inflater_.avail_out = sizeof(inflated);
      const int status = inflate(&inflater_, Z_NO_FLUSH);
      out.append(inflated, sizeof(inflated) - inflater_.avail_out);
      if (status == Z_STREAM_END || (status != Z_OK && status != Z_BUF_ERROR)) {
        done_ = true;  // the end, or damage: keep what came before
        break;
      }
      if (status == Z_BUF_ERROR && inflater_.avail_out != 0) break;
    } while (inflater_.avail_in > 0 || inflater_.avail_out == 0);
    return true;
  }

 private:
  ssize_t read_raw() {
    for (;;) {
      const ssize_t count = ::read(fd_, raw_.data(), raw_.size());
      if (count >= 0) return count;
      if (errno != EINTR) fail(path_, std::strerror(errno));
    }
  }

  const std::string& path_;
  int fd_ = -1;
  bool gzip_ = false;
  bool done_ = false;
  z_stream inflater_{};
  std::string raw_;
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
// Ids are dense (record ids), so a bitmap holds them.
struct NodeIndex {
  std::vector<bool> present;
  std::unordered_map<uint64_t, uint64_t> root_by_logical_tid;

  void add(std::string_view line) {
    const auto id = integer_after(line, "{\"id\": ");
    if (!id) return;
    if (*id >= present.size()) present.resize(std::max<size_t>(*id + 1, present.size() * 2));
    present[*id] = true;
    if (line.find("\"name\": \"[pytorch|profiler|execution_trace|thread]\"") != std::string_view::npos)
      if (const auto tid = integer_after(line, "{\"name\": \"tid\", \"type\": \"uint64\", \"value\": "))
        root_by_logical_tid[*tid] = *id;
  }
  bool has(uint64_t id) const { return id < present.size() && present[id]; }
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

// What the lines seen so far say about the file, and where the copy stands.
struct Recovery {
  enum class Kind { kUnknown, kChromeTrace, kExecutionTrace } kind = Kind::kUnknown;
  bool in_events = false;
  bool events_ended = false;
  uint64_t events = 0;
  uint64_t base_time_ns = 0;
  uint64_t start_ts_ms = 0;
  uint64_t first_start_relative_ns = UINT64_MAX;  // Chrome: the earliest start among the kept events
  uint64_t last_end_relative_ns = 0;              // Chrome: the latest end among the kept events
  uint64_t pid = 0;
  uint64_t largest_record_id = 0;
  bool has_step = false;  // a ProfilerStep annotation was kept
};

// Whether `line` (without its newline) is kept.
bool take_line(std::string_view line, Recovery& recovery) {
  using Kind = Recovery::Kind;
  if (recovery.events_ended) return false;
  if (!recovery.in_events) {
    if (line.starts_with("  \"schemaVersion\": ")) recovery.kind = Kind::kChromeTrace;
    if (line.starts_with("  \"schema\": ")) {
      recovery.kind = Kind::kExecutionTrace;
      recovery.start_ts_ms = integer_after(line, "\"start_ts\": ").value_or(0);
    }
    if (const auto base = integer_after(line, "\"baseTimeNanoseconds\": ")) recovery.base_time_ns = *base;
    recovery.in_events = line == "  \"traceEvents\": [" || line == "  \"nodes\": [";
    return true;
  }
  // Every event or node line ends with "},"; the first that does not is the writer's own
  // ending, cut short.
  if (!line.ends_with("},")) {
    recovery.events_ended = true;
    return false;
  }
  ++recovery.events;
  if (recovery.kind == Kind::kChromeTrace && line.starts_with("  {\"ph\": \"X\"")) {
    if (const auto ts = number_after(line, "\"ts\": ")) {
      recovery.first_start_relative_ns = std::min(recovery.first_start_relative_ns, *ts);
      recovery.last_end_relative_ns = std::max(recovery.last_end_relative_ns, *ts + number_after(line, "\"dur\": ").value_or(0));
    }
    recovery.pid = integer_after(line, "\"pid\": ").value_or(recovery.pid);
    recovery.largest_record_id = std::max(recovery.largest_record_id, integer_after(line, "\"External id\": ").value_or(0));
    recovery.has_step = recovery.has_step || line.find("\"name\": \"ProfilerStep#") != std::string_view::npos;
  }
  return true;
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

// Calls `visit` with every complete line (without its newline) of the partial file, until it
// returns false.
template <typename Visit>
void for_each_line(const std::string& partial_path, Visit visit) {
  PartialReader reader(partial_path);
  std::string text;
  size_t line_start = 0;
  while (reader.read(text)) {
    for (size_t newline; (newline = text.find('\n', line_start)) != std::string::npos; line_start = newline + 1)
      if (!visit(std::string_view(text.data() + line_start, newline - line_start))) return;
    text.erase(0, line_start);  // keep the unfinished line for the next piece
    line_start = 0;
  }
}

}  // namespace

RecoveredFile recover_partial_file(const std::string& partial_path, mode_t mode) {
  constexpr std::string_view kSuffix = OutputFile::kPartialSuffix;
  if (!partial_path.ends_with(kSuffix)) fail(partial_path, "not a " + std::string(kSuffix) + " file");
  const std::string final_path = partial_path.substr(0, partial_path.size() - kSuffix.size());
  struct stat existing {};
  if (::lstat(final_path.c_str(), &existing) == 0) fail(partial_path, final_path + " already exists");

  // A first pass learns what the file is from its header and, for an ET only, reads on to
  // learn which nodes it holds.
  Recovery survey;
  NodeIndex nodes;
  for_each_line(partial_path, [&](std::string_view line) {
    if (!take_line(line, survey) || !survey.in_events) return true;
    if (survey.kind != Recovery::Kind::kExecutionTrace) return false;
    nodes.add(line);
    return true;
  });
  if (survey.kind == Recovery::Kind::kUnknown) fail(partial_path, "neither a tprof trace nor its Execution Trace");
  if (!survey.in_events) fail(partial_path, "it ends inside its header: nothing was recorded");
  const bool execution_trace = survey.kind == Recovery::Kind::kExecutionTrace;

  OutputFile output(final_path, {.mode = mode, .temp_suffix = ".recovering", .keep_on_failure = false});
  Recovery recovery;
  for_each_line(partial_path, [&](std::string_view line) {
    if (!take_line(line, recovery)) return true;
    if (execution_trace && recovery.in_events && line.ends_with("},")) {
      output.write(with_existing_parent(line, nodes));
    } else {
      output.write(line);
    }
    output.write("\n");
    return true;
  });

  RecoveredFile recovered{final_path, execution_trace, recovery.events};
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
