#include "userspace/cli/report.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <istream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <streambuf>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "symbolizer/dynamo/inductor_kernels.h"
#include "userspace/cli/compile_summary.h"
#include "userspace/cli/error.h"

namespace tprof {
namespace {

using nlohmann::json;

// The file's text, inflated chunk by chunk as the parser asks for it (zlib reads plain files
// through too), so neither the text nor a DOM is ever held whole. nlohmann's lexer buffers a
// whole token before handing it on, so its length is bounded here, as the bytes pass.
class InflatedText final : public std::streambuf {
 public:
  InflatedText(const std::string& path, const ReportLimits& limits)
      : path_(path), limits_(limits), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) throw Error(errno_message("cannot open " + path, errno));
  }
  InflatedText(const InflatedText&) = delete;
  InflatedText& operator=(const InflatedText&) = delete;
  ~InflatedText() override { gzclose(file_); }

  // Bytes of inflated text the parser has taken.
  uint64_t offset() const { return passed_ + static_cast<uint64_t>(gptr() - eback()); }

 private:
  int_type underflow() override {
    passed_ += static_cast<uint64_t>(egptr() - eback());
    const int read = gzread(file_, chunk_.data(), chunk_.size());
    if (read < 0) {
      int code = 0;
      throw Error(path_ + ": byte " + std::to_string(passed_) + ": unreadable: " + gzerror(file_, &code));
    }
    if (read == 0) return traits_type::eof();
    if (passed_ + static_cast<uint64_t>(read) > limits_.max_inflated_bytes)
      throw Error(path_ + ": more than " + std::to_string(limits_.max_inflated_bytes) +
                  " bytes of text after gunzip (tprof report's limit)");
    watch_tokens(static_cast<size_t>(read));
    setg(chunk_.data(), chunk_.data(), chunk_.data() + read);
    return traits_type::to_int_type(chunk_[0]);
  }

  // The lexer keeps every byte since the last string or number began (for its messages), so the
  // bound is on that: strings are followed by their quotes and escapes, numbers by their digits.
  void watch_tokens(size_t size) {
    for (size_t i = 0; i < size; ++i) {
      const char c = chunk_[i];
      if (in_string_) {
        if (escaped_) {
          escaped_ = false;
        } else if (c == '\\') {
          escaped_ = true;
        } else if (c == '"') {
          in_string_ = false;
        }
      } else if (c == '"') {
        in_string_ = true;
        token_ = 0;
      } else {
        const bool digit = (c >= '0' && c <= '9') || c == '-';
        if (digit && !in_number_) token_ = 0;
        in_number_ = digit || (in_number_ && (c == '.' || c == 'e' || c == 'E' || c == '+'));
      }
      if (++token_ > limits_.max_token_bytes)
        throw Error(path_ + ": byte " + std::to_string(passed_ + i) + ": more than " +
                    std::to_string(limits_.max_token_bytes) + " bytes in one string or number, or between two" +
                    " (tprof report's limit)");
    }
  }

  const std::string path_;
  const ReportLimits limits_;
  gzFile file_;
  std::array<char, 1 << 16> chunk_{};
  uint64_t passed_ = 0;  // bytes before the chunk in hand
  bool in_string_ = false;
  bool escaped_ = false;
  bool in_number_ = false;
  size_t token_ = 0;  // bytes since the last string or number began
};

// Names, shapes and threads by number, so that a range is a small fixed-size record.
class DistinctStrings {
 public:
  DistinctStrings(const std::string& path, size_t max_bytes) : path_(path), max_bytes_(max_bytes) {}

  uint32_t id(const std::string& text) {
    const auto [entry, added] = ids_.try_emplace(text, static_cast<uint32_t>(texts_.size()));
    if (!added) return entry->second;
    bytes_ += text.size() + kEntryBytes;
    if (bytes_ > max_bytes_)
      throw Error(path_ + ": more than " + std::to_string(max_bytes_) +
                  " bytes of distinct op names, shapes and threads (tprof report's limit)");
    texts_.push_back(&entry->first);
    return entry->second;
  }
  const std::string& text(uint32_t id) const { return *texts_[id]; }

 private:
  static constexpr size_t kEntryBytes = 64;  // the hash node and the pointer, roughly
  const std::string& path_;
  const size_t max_bytes_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<const std::string*> texts_;
  size_t bytes_ = 0;
};

struct Range {
  int64_t start_ns;
  int64_t end_ns;
  uint64_t flops;  // the event's "flops" arg, where the writer estimated them
  uint32_t name;
  uint32_t shapes;
};
static_assert(sizeof(Range) == 32, "ReportLimits and the docs count 32 bytes a range");

// A [memory] event: a block allocated (bytes > 0) or freed, the CPU's or a device's.
struct MemoryPoint {
  int64_t time_ns;
  int64_t bytes;
  bool device;
};

struct ThreadEvents {
  std::vector<Range> ranges;
  std::vector<MemoryPoint> memory;
};

// The fields of one event that the table needs, as they arrive.
struct Event {
  std::optional<std::string> phase, category, name;
  std::string pid = "null", tid = "null";  // as JSON, any scalar: the thread is the pair
  std::optional<int64_t> start_ns, duration_ns;
  uint64_t flops = 0;
  std::optional<std::string> shapes;  // "Input Dims" as tprof and torch write it: "[[4, 8], [8, 3]]"
  std::optional<std::string> recompile_reason;
  std::optional<int64_t> bytes;       // a [memory] event's "Bytes"
  int64_t device_type = 0;            // and its "Device Type": CPU 0
};

// A ts or dur, in nanoseconds; nullopt past ±kMaxTraceMicroseconds.
std::optional<int64_t> nanoseconds(const json& microseconds) {
  const double value = microseconds.get<double>();
  if (!(std::fabs(value) <= kMaxTraceMicroseconds)) return std::nullopt;
  // Integers exactly: epoch microseconds (1.7e15) in nanoseconds are past a double's 53 bits.
  if (microseconds.is_number_integer()) return microseconds.get<int64_t>() * 1000;
  return std::llround(value * 1000.0);
}

// The SAX handler: walks the events of either layout (an object's "traceEvents", or a
// top-level array) as they stream past, keeping only each counted range. An event whose fields
// have the wrong type is an error, not skipped: the file is then not the trace it claims to be.
class TraceReader {
 public:
  TraceReader(const std::string& path, const InflatedText& text, bool group_by_shape, const ReportLimits& limits)
      : path_(path), text_(text), group_by_shape_(group_by_shape), limits_(limits), strings_(path, limits.max_distinct_bytes) {}

  bool null() { return value(json()); }
  bool boolean(bool flag) { return value(json(flag)); }
  bool number_integer(json::number_integer_t number) { return value(json(number)); }
  bool number_unsigned(json::number_unsigned_t number) { return value(json(number)); }
  bool number_float(json::number_float_t number, const std::string&) { return value(json(number)); }
  bool string(std::string& text) { return value(json(std::move(text))); }
  bool binary(json::binary_t&) { return true; }  // JSON text has none
  bool start_object(size_t) { return open(false); }
  bool start_array(size_t) { return open(true); }
  bool end_object() { return close('}'); }
  bool end_array() { return close(']'); }
  bool key(std::string& name);
  bool parse_error(size_t position, const std::string&, const json::exception& error);

  // The ranges and memory events by thread, once the whole text has passed.
  std::map<uint32_t, ThreadEvents>& threads();
  // The names of the python_function events of the functions dynamo resumes after a graph break.
  const std::set<std::string>& resume_functions() const { return resume_functions_; }
  // The "Recompile reason" args of tprof's compile wait counters (model/trace_sink.h).
  const std::set<std::string>& recompile_reasons() const { return recompile_reasons_; }
  const DistinctStrings& strings() const { return strings_; }

 private:
  // Where the events array is open, how deep inside it: the events array is 0, an event 1, the
  // value of one of its fields 2, a value in its args 3, deeper inside Input Dims.
  size_t container_level() const { return events_depth_ == 0 ? 0 : depth_ - events_depth_; }
  size_t value_level() const { return events_depth_ == 0 ? 0 : container_level() + 1; }
  bool in_input_dims() const {
    return group_by_shape_ && field_ == "args" && arg_ == "Input Dims" && event_.shapes.has_value();
  }
  bool open(bool array);
  bool close(char bracket);
  bool value(const json& scalar);
  void field(const json& scalar);
  void append_dims(const std::string& text);
  void finish_event();
  void finish_memory_event();
  void note_resume_function();
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(path_ + ": byte " + std::to_string(text_.offset()) + ": " + what);
  }
  [[noreturn]] void fail_event(const std::string& what) const {
    throw Error(path_ + ": event " + std::to_string(event_index_) + " (byte " + std::to_string(text_.offset()) + "): " + what);
  }

  const std::string& path_;
  const InflatedText& text_;
  const bool group_by_shape_;
  const ReportLimits& limits_;
  size_t depth_ = 0;         // arrays and objects open around the value at hand
  size_t events_depth_ = 0;  // depth of the events array while it is open
  bool saw_events_ = false;
  std::string root_key_;     // the key at hand in a top-level object
  std::string field_, arg_;  // the key at hand in the event, in its args
  size_t event_index_ = 0;
  Event event_;
  size_t ranges_ = 0;
  DistinctStrings strings_;
  std::map<uint32_t, ThreadEvents> threads_;  // by the interned "pid\ntid"
  std::set<std::string> resume_functions_;
  std::set<std::string> recompile_reasons_;
};

bool TraceReader::open(bool array) {
  const size_t at = value_level();
  if (++depth_ > limits_.max_depth)
    fail("JSON nested deeper than " + std::to_string(limits_.max_depth) + " levels (tprof report's limit)");
  const bool events = events_depth_ == 0 && array &&
                      (depth_ == 1 || (depth_ == 2 && root_key_ == "traceEvents"));  // torch 1.13's, or 2.x's
  if (events) {
    events_depth_ = depth_;
    saw_events_ = true;
  } else if (at == 1) {
    if (array) fail_event("an array, not an object");
    event_ = Event{};
    field_.clear();
  } else if (at == 2) {
    field(array ? json::array() : json::object());
    arg_.clear();
  } else if (at == 3 && group_by_shape_ && field_ == "args" && arg_ == "Input Dims") {
    event_.shapes = array ? "[" : "{";
  } else if (at >= 4 && in_input_dims()) {
    append_dims(array ? "[" : "{");
  }
  return true;
}

bool TraceReader::close(char bracket) {
  const size_t at = container_level();
  if (events_depth_ != 0 && at == 0) events_depth_ = 0;  // past the events: the rest is not read
  if (at == 1) {
    finish_event();
    ++event_index_;
  }
  if (at >= 3 && in_input_dims()) event_.shapes->push_back(bracket);
  --depth_;
  return true;
}

bool TraceReader::key(std::string& name) {
  const size_t at = container_level();
  if (depth_ == 1 && events_depth_ == 0) root_key_ = name;
  if (at == 1) field_ = name;
  if (at == 2 && field_ == "args") arg_ = name;
  if (at >= 3 && in_input_dims()) append_dims(json(name).dump() + ": ");
  return true;
}

bool TraceReader::value(const json& scalar) {
  const size_t at = value_level();
  if (at == 1) fail_event(std::string("a ") + scalar.type_name() + ", not an object");
  if (at == 2) field(scalar);
  if (at == 3 && field_ == "args" && arg_ == "flops") {
    if (!scalar.is_number_unsigned()) fail_event("args.flops is " + scalar.dump() + ", not a count");
    event_.flops = scalar.get<uint64_t>();
  }
  // Other events may name args so too: only a [memory] event needs them, as integers.
  if (at == 3 && field_ == "args" && (arg_ == "Bytes" || arg_ == "Device Type") && scalar.is_number_integer())
    (arg_ == "Bytes" ? event_.bytes.emplace() : event_.device_type) = scalar.get<int64_t>();
  if (at == 3 && group_by_shape_ && field_ == "args" && arg_ == "Input Dims") event_.shapes = scalar.dump();
  if (at == 3 && field_ == "args" && arg_ == model::kRecompileReasonArg && scalar.is_string())
    event_.recompile_reason = scalar.get<std::string>();
  if (at >= 4 && in_input_dims()) append_dims(scalar.dump());
  return true;
}

// One of the Trace Event Format's own fields: its type is checked on every event.
void TraceReader::field(const json& scalar) {
  const auto text = [&](std::optional<std::string>& into) {
    if (!scalar.is_string()) fail_event(field_ + " has type " + scalar.type_name() + ", not string");
    into = scalar.get<std::string>();
  };
  const auto time = [&](std::optional<int64_t>& into) {
    if (!scalar.is_number()) fail_event(field_ + " has type " + scalar.type_name() + ", not number");
    into = nanoseconds(scalar);
    if (!into) fail_event(field_ + " is " + scalar.dump() + ", beyond ±4e15 us");
  };
  const auto thread = [&](std::string& into) {
    if (!scalar.is_number() && !scalar.is_string())
      fail_event(field_ + " has type " + scalar.type_name() + ", not number or string");
    into = scalar.dump();
  };
  if (field_ == "ph") text(event_.phase);
  if (field_ == "cat") text(event_.category);
  if (field_ == "name") text(event_.name);
  if (field_ == "ts") time(event_.start_ns);
  if (field_ == "dur") time(event_.duration_ns);
  if (field_ == "pid") thread(event_.pid);
  if (field_ == "tid") thread(event_.tid);
}

void TraceReader::append_dims(const std::string& text) {
  std::string& shapes = *event_.shapes;
  if (const char last = shapes.back(); last != '[' && last != '{' && last != ' ') shapes += ", ";
  shapes += text;
  if (shapes.size() > limits_.max_token_bytes)
    fail_event("Input Dims longer than " + std::to_string(limits_.max_token_bytes) + " bytes (tprof report's limit)");
}

// A complete event (ph X) of an op or annotation becomes a range; torch 1.13's legacy export
// writes no cat at all, and every complete event of it is an op or a record_function.
void TraceReader::finish_event() {
  if (event_.phase == "i" && event_.name == "[memory]") {
    finish_memory_event();
    return;
  }
  if (event_.phase != "X") return;
  if (event_.category == "python_function") {
    note_resume_function();
    return;
  }
  if (event_.category && event_.category != "cpu_op" && event_.category != "user_annotation") return;
  constexpr size_t kMaxRecompileReasons = 1024;
  if (event_.recompile_reason && recompile_reasons_.size() < kMaxRecompileReasons)
    recompile_reasons_.insert(*event_.recompile_reason);
  if (!event_.start_ns || !event_.duration_ns) fail_event("a complete event (ph X) without a numeric ts and dur");
  if (*event_.duration_ns < 0) fail_event("negative dur");
  if (++ranges_ > limits_.max_ranges)
    fail("more than " + std::to_string(limits_.max_ranges) + " op and annotation ranges (tprof report's limit)");
  const uint32_t thread = strings_.id(event_.pid + '\n' + event_.tid);
  const std::string shapes = group_by_shape_ ? event_.shapes.value_or("[]") : "";
  threads_[thread].ranges.push_back({*event_.start_ns, *event_.start_ns + *event_.duration_ns, event_.flops,
                                     strings_.id(event_.name.value_or("")), strings_.id(shapes)});
}

// Kineto's [memory] instant (profile_memory=True, tprof --memory): the CPU's count towards the
// table's CPU Mem columns, a device's towards its CUDA Mem.
void TraceReader::finish_memory_event() {
  if (!event_.start_ns || !event_.bytes) fail_event("a [memory] event without a numeric ts and an integer args.Bytes");
  if (++ranges_ > limits_.max_ranges)
    fail("more than " + std::to_string(limits_.max_ranges) + " op, annotation and memory events (tprof report's limit)");
  threads_[strings_.id(event_.pid + '\n' + event_.tid)].memory.push_back(
      {*event_.start_ns, *event_.bytes, event_.device_type != 0});
}

// A graph break shows as the function dynamo resumes after it (compile_summary.h); a bounded
// number of their names is kept.
void TraceReader::note_resume_function() {
  constexpr size_t kMaxResumeFunctions = 1024;
  if (!event_.name || event_.name->find("): torch_dynamo_resume_in_") == std::string::npos) return;
  if (resume_functions_.size() < kMaxResumeFunctions) resume_functions_.insert(*event_.name);
}

bool TraceReader::parse_error(size_t position, const std::string&, const json::exception& error) {
  // what() is "[json.exception.parse_error.101] parse error at line 1, column 2: <detail>".
  const std::string what = error.what();
  const size_t detail = what.find(": ", what.find("column"));
  throw Error(path_ + ": byte " + std::to_string(position) + ": not JSON: " +
              (detail == std::string::npos ? what : what.substr(detail + 2, 200)));
}

std::map<uint32_t, ThreadEvents>& TraceReader::threads() {
  if (!saw_events_)
    throw Error(path_ + " is not a Chrome trace (a JSON object with a traceEvents array, or an array of events)");
  return threads_;
}

// One thread's ranges, by start and outermost first, into the table: each one's direct
// children are the ranges that start inside it while it is the innermost open one. A memory
// event counts towards the CPU Mem of every range open around it (its ts within theirs, ends
// included, as torch's parsers take them) and the Self CPU Mem of the innermost; outside every
// range, towards the "[memory]" row.
void add_thread(ThreadEvents& events, const DistinctStrings& strings, OperatorTotalsTable& table) {
  std::vector<Range>& ranges = events.ranges;
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return std::tie(a.start_ns, b.end_ns) < std::tie(b.start_ns, a.end_ns);
  });
  std::stable_sort(events.memory.begin(), events.memory.end(),
                   [](const MemoryPoint& a, const MemoryPoint& b) { return a.time_ns < b.time_ns; });
  if (!events.memory.empty()) table.show_memory();
  struct Open {
    const Range* range;
    uint64_t children_ns;
    RangeMemory memory;
  };
  std::vector<Open> open;
  const auto close = [&](const Open& entry) {
    const Range& range = *entry.range;
    const auto duration = static_cast<uint64_t>(range.end_ns - range.start_ns);
    table.add(strings.text(range.name), strings.text(range.shapes), duration - std::min(duration, entry.children_ns),
              duration, range.flops, entry.memory);
  };
  const auto close_ended_before = [&](int64_t time_ns, bool at_time_too) {
    while (!open.empty() && (open.back().range->end_ns < time_ns || (at_time_too && open.back().range->end_ns == time_ns))) {
      close(open.back());
      open.pop_back();
    }
  };
  size_t next_memory = 0;
  const auto attribute_memory_before = [&](int64_t limit_ns) {
    for (; next_memory < events.memory.size() && events.memory[next_memory].time_ns < limit_ns; ++next_memory) {
      const MemoryPoint& point = events.memory[next_memory];
      if (point.device) table.show_device_memory();
      close_ended_before(point.time_ns, false);
      if (open.empty()) {
        table.add_unattributed_memory(point.bytes, point.device);
        continue;
      }
      for (Open& entry : open) (point.device ? entry.memory.device : entry.memory.cpu) += point.bytes;
      (point.device ? open.back().memory.self_device : open.back().memory.self_cpu) += point.bytes;
    }
  };
  for (const Range& range : ranges) {
    attribute_memory_before(range.start_ns);
    close_ended_before(range.start_ns, true);
    if (!open.empty()) open.back().children_ns += static_cast<uint64_t>(range.end_ns - range.start_ns);
    open.push_back({&range, 0, {}});
  }
  attribute_memory_before(INT64_MAX);
  for (auto entry = open.rbegin(); entry != open.rend(); ++entry) close(*entry);
}

// "  512.00 Kb in 3 blocks: aten::mm at train.py(40): step <- train.py(80): main" per group.
std::string format_holders(const json& holders) {
  std::string text;
  for (const json& holder : holders) {
    text += "  " + format_memory(holder.value("bytes", int64_t{0})) + " in " +
            std::to_string(holder.value("blocks", uint64_t{0})) + " blocks: ";
    const std::string op = holder.value("op", std::string());
    text += op.empty() ? "outside every op" : op;
    const json& stack = holder.contains("stack") ? holder.at("stack") : json::array();
    for (size_t frame = 0; frame < stack.size(); ++frame)
      text += (frame == 0 ? " at " : " <- ") + stack[frame].get<std::string>();
    text += '\n';
  }
  return text;
}

}  // namespace

std::string memory_report_from_trace(const std::string& path, const ReportLimits& limits) {
  InflatedText text(path, limits);
  std::istream stream(&text);
  // The events are dropped as they end: only the summary after them is kept whole.
  bool in_events = false;
  const json::parser_callback_t keep = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 0 && event == json::parse_event_t::array_start) in_events = true;  // torch 1.13's array
    if (depth == 1 && event == json::parse_event_t::key) in_events = parsed == "traceEvents";
    const bool ends_a_value = event == json::parse_event_t::value || event == json::parse_event_t::object_end ||
                              event == json::parse_event_t::array_end;
    return !(in_events && depth >= 1 && ends_a_value);
  };
  json document;
  try {
    document = json::parse(stream, keep);
  } catch (const json::exception& error) {
    throw Error(path + ": not JSON (" + std::string(error.what()) + ")");
  }
  if (!document.is_object() || !document.contains("tprof_summary") || !document.at("tprof_summary").contains("memory"))
    throw Error(path + " has no memory summary: it was not recorded by tprof --memory");
  const json& memory = document.at("tprof_summary").at("memory");
  try {
    std::string report = "memory: " + std::to_string(memory.at("allocations").get<uint64_t>()) + " allocations and " +
                         std::to_string(memory.at("frees").get<uint64_t>()) + " frees of CPU blocks; peak " +
                         format_memory(memory.at("peak_allocated_bytes").get<int64_t>()) +
                         " allocated (of the blocks seen allocated since attaching), " +
                         format_memory(memory.at("allocated_at_end").get<int64_t>()) + " still allocated at the end\n";
    report += "blocks live at the peak, by where they were allocated (largest first):\n";
    report += format_holders(memory.at("peak_holders"));
    if (memory.contains("live_from_earlier_cycles")) {
      report += "still live at this cycle's end, allocated before it began (largest first):\n";
      report += format_holders(memory.at("live_from_earlier_cycles"));
    }
    return report;
  } catch (const json::exception& error) {
    throw Error(path + ": tprof_summary.memory is not as tprof writes it (" + std::string(error.what()) + ")");
  }
}

namespace {

// The keys of the wait counters torch starts around its compile work (and c10d's, TCPStore's).
constexpr std::string_view kWaitCounterPrefix = "pytorch.wait_counter.";

// What a range of a saved trace is to the compile summary, from its name alone: dynamo's
// region, an inductor C++ kernel, a wait counter (tprof's traces), torch 2.6's compile work, an
// operator ("ns::name", not the autograd engine's ranges), or a range that only encloses.
const model::Operator& operator_named(std::map<std::string, model::Operator, std::less<>>& operators,
                                      const std::string& name) {
  if (const auto found = operators.find(name); found != operators.end()) return found->second;
  model::RangeKind kind = model::RangeKind::kUserAnnotation;
  std::pair<uint64_t, uint64_t> graph;
  if (parse_compiled_region(name, &graph))
    kind = model::RangeKind::kFunctionRange;
  else if (symbolizer::is_inductor_kernel_name(name))
    kind = model::RangeKind::kCompiledKernel;
  else if (name.starts_with(kWaitCounterPrefix))
    kind = model::RangeKind::kWaitCounter;
  else if (name.find("::") != std::string::npos && !name.starts_with("autograd::") && name.find(' ') == std::string::npos)
    kind = model::RangeKind::kOperator;
  return operators.emplace(name, model::Operator{name, "", kind, {}, ""}).first->second;
}

// One thread's ranges into `sink` in the order they closed while recording, innermost first:
// by start, outermost first, each closing once a range starts at or after its end (as
// add_thread nests them).
void close_ranges_into(ThreadEvents& events, uint32_t thread, const DistinctStrings& strings,
                       std::map<std::string, model::Operator, std::less<>>& operators, model::TraceSink& sink) {
  std::vector<Range>& ranges = events.ranges;
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return std::tie(a.start_ns, b.end_ns) < std::tie(b.start_ns, a.end_ns);
  });
  std::vector<const Range*> open;
  const auto close_top = [&] {
    const Range& range = *open.back();
    open.pop_back();
    // The interned name stands for the operator index: one per name.
    model::OpSpan span;
    span.start_ns = static_cast<uint64_t>(range.start_ns);
    span.end_ns = static_cast<uint64_t>(range.end_ns);
    span.operator_index = range.name;
    span.depth = static_cast<uint32_t>(open.size());
    sink.op({.tid = thread, .span = span, .op = operator_named(operators, strings.text(range.name))});
  };
  for (const Range& range : ranges) {
    while (!open.empty() && open.back()->end_ns <= range.start_ns) close_top();
    open.push_back(&range);
  }
  while (!open.empty()) close_top();
}

}  // namespace

std::vector<std::string> compile_summary_from_trace(const std::string& path, const ReportLimits& limits) {
  std::vector<std::string> compile_summary;
  totals_from_trace(path, /*group_by_shape=*/false, limits, &compile_summary);
  return compile_summary;
}

OperatorTotalsTable totals_from_trace(const std::string& path, bool group_by_shape, const ReportLimits& limits,
                                      std::vector<std::string>* compile_summary) {
  InflatedText text(path, limits);
  std::istream stream(&text);
  TraceReader reader(path, text, group_by_shape, limits);
  json::sax_parse(stream, &reader, json::input_format_t::json, /*strict=*/true);
  OperatorTotalsTable table(group_by_shape);
  CompileSummarySink compile;
  std::map<std::string, model::Operator, std::less<>> operators;  // by name, for the compile summary
  for (auto& [thread, events] : reader.threads()) {
    if (compile_summary) close_ranges_into(events, thread, reader.strings(), operators, compile);
    add_thread(events, reader.strings(), table);
    events = ThreadEvents{};
  }
  if (!compile_summary) return table;
  for (const std::string& name : reader.resume_functions()) {
    model::PythonSpan span;
    span.name = name;
    compile.python_span(0, span);
  }
  for (const std::string& reason : reader.recompile_reasons()) compile.recompile_reason(reason);
  *compile_summary = compile.describe();
  return table;
}

}  // namespace tprof
