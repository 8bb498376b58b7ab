#include "tests/support/trace_validator.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace tprof::test {
namespace {

constexpr std::array<unsigned char, 2> kGzipMagic = {0x1f, 0x8b};

// Kineto's ChromeTraceBaseTime quantum ("3 months"), formats.md §2.3.
constexpr std::uint64_t kBaseTimeQuantumNs = 7'889'238ULL * 1'000'000'000ULL;

// Kineto's top-level key order (formats.md §2.2); other keys may sit in between. tprof writes
// deviceProperties after traceEvents (the GPUs are known only after the header), which no
// consumer minds: they read it as a key of the whole object.
constexpr std::array<std::string_view, 5> kTopLevelKeyOrder = {
    "schemaVersion", "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds", "traceEvents"};

// Categories recorded on CPU threads: HTA takes "stream" + "correlation" for a GPU event, so
// none of them may carry a "stream" arg (formats.md §2.5.1).
constexpr std::array<std::string_view, 5> kCpuCategories = {
    "cpu_op", "user_annotation", "python_function", "cuda_runtime", "cuda_driver"};

bool is_cpu_category(std::string_view category) {
  return std::find(kCpuCategories.begin(), kCpuCategories.end(), category) != kCpuCategories.end();
}

// Collects violations, keeping at most a few examples per rule so that one systematic bug
// (say, every slice mis-nested) does not bury the others in thousands of lines.
class ViolationList {
 public:
  void add(const std::string& rule, const std::string& detail) {
    if (++counts_[rule] <= kExamplesPerRule) reports_.push_back("[" + rule + "] " + detail);
  }

  std::vector<std::string> take() && {
    for (const auto& [rule, count] : counts_) {
      if (count > kExamplesPerRule) {
        reports_.push_back("[" + rule + "] ... and " + std::to_string(count - kExamplesPerRule) +
                           " more");
      }
    }
    return std::move(reports_);
  }

 private:
  static constexpr std::size_t kExamplesPerRule = 10;
  std::vector<std::string> reports_;
  std::map<std::string, std::size_t> counts_;
};

struct GzFileCloser {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzFileHandle = std::unique_ptr<std::remove_pointer_t<gzFile>, GzFileCloser>;

bool starts_with_gzip_magic(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::array<char, 2> head{};
  in.read(head.data(), head.size());
  return in.gcount() == 2 && static_cast<unsigned char>(head[0]) == kGzipMagic[0] &&
         static_cast<unsigned char>(head[1]) == kGzipMagic[1];
}

std::string inflate_gzip_file(const std::filesystem::path& path) {
  GzFileHandle file(gzopen(path.c_str(), "rb"));
  if (!file) throw std::runtime_error("cannot open " + path.string());
  std::string text;
  std::array<char, 1 << 16> chunk{};
  for (;;) {
    const int read = gzread(file.get(), chunk.data(), chunk.size());
    if (read < 0) {
      int error_code = 0;
      throw std::runtime_error(std::string("gzip error: ") + gzerror(file.get(), &error_code));
    }
    if (read == 0) break;
    text.append(chunk.data(), static_cast<std::size_t>(read));
  }
  // gzread reports a truncated stream as a plain end of data; only gzerror tells.
  int error_code = Z_OK;
  const char* message = gzerror(file.get(), &error_code);
  if (error_code != Z_OK) {
    throw std::runtime_error(std::string("gzip error: ") + message);  // names the file
  }
  return text;
}

std::string describe_event(const TraceJson& event, std::size_t index) {
  std::string description = "traceEvents[" + std::to_string(index) + "]";
  if (event.is_object() && event.contains("name") && event["name"].is_string()) {
    description += " '" + event["name"].get<std::string>() + "'";
  }
  return description;
}

// "<µs>.<3-digit ns>" as integer ns; the long double carries enough digits that rounding
// lands on the written value.
std::int64_t microseconds_to_ns(const TraceJson& value) {
  return std::llround(value.get<long double>() * 1000.0L);
}

bool is_track_id(const TraceJson& value) {
  // Perfetto takes uint32 ids or strings (interned); anything else is dropped.
  return value.is_number_unsigned() || value.is_string() ||
         (value.is_number_integer() && value.get<std::int64_t>() >= 0);
}

struct Slice {
  std::int64_t begin_ns = 0;
  std::int64_t end_ns = 0;
  std::size_t event_index = 0;
  // As a consumer that reads numbers as float64 sees it (TensorBoard's op tree, HTA's pandas):
  // ts, and ts + dur computed in doubles.
  double begin_us = 0;
  double end_us = 0;
};

using TrackKey = std::pair<std::string, std::string>;  // (pid, tid) as written

void check_top_level(const TraceJson& trace, ViolationList& violations) {
  std::map<std::string_view, std::size_t> position_of_key;
  std::size_t position = 0;
  for (const auto& item : trace.items()) {
    for (const auto key : kTopLevelKeyOrder) {
      if (item.key() == key) position_of_key[key] = position;
    }
    ++position;
  }
  std::string_view previous_present_key;
  for (const auto key : kTopLevelKeyOrder) {
    const auto found = position_of_key.find(key);
    if (found == position_of_key.end()) {
      violations.add("top-level", "missing key \"" + std::string(key) + "\"");
      continue;
    }
    if (!previous_present_key.empty() && position_of_key[previous_present_key] > found->second) {
      violations.add("top-level", "\"" + std::string(previous_present_key) +
                                      "\" must come before \"" + std::string(key) +
                                      "\" (Kineto order)");
    }
    previous_present_key = key;
  }

  if (trace.contains("schemaVersion") && trace["schemaVersion"] != 1) {
    violations.add("top-level", "schemaVersion must be 1, is " + trace["schemaVersion"].dump());
  }
  if (trace.contains("deviceProperties") && !trace["deviceProperties"].is_array()) {
    violations.add("top-level", "deviceProperties must be an array");
  }
  if (trace.contains("distributedInfo")) {
    const auto& info = trace["distributedInfo"];
    if (!info.is_object() || !info.contains("rank") || !info["rank"].is_number_integer()) {
      violations.add("top-level", "distributedInfo must be an object with an integer rank");
    }
  }
  if (trace.contains("displayTimeUnit") && trace["displayTimeUnit"] != "ms") {
    violations.add("top-level", "displayTimeUnit must be \"ms\" (timestamps are µs), is " +
                                    trace["displayTimeUnit"].dump());
  }
  if (trace.contains("baseTimeNanoseconds")) {
    const auto& base = trace["baseTimeNanoseconds"];
    if (!base.is_number_unsigned()) {
      violations.add("top-level", "baseTimeNanoseconds must be a non-negative integer");
    } else if (base.get<std::uint64_t>() % kBaseTimeQuantumNs != 0) {
      violations.add("top-level", "baseTimeNanoseconds " + base.dump() +
                                      " is not floored to Kineto's 7,889,238 s quantum");
    }
  }
  if (trace.contains("traceEvents") && !trace["traceEvents"].is_array()) {
    violations.add("top-level", "traceEvents must be an array");
  }
}

// The HTA version Chakra pins reads the rank from the first line that contains "rank",
// with this regex, and fails the whole analysis when it does not match.
void check_rank_line(const std::string& text, ViolationList& violations) {
  static const std::regex kRankPattern(R"("rank": \d+)");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("rank") == std::string::npos) continue;
    if (!std::regex_search(line, kRankPattern)) {
      violations.add("rank-line",
                     "first line containing \"rank\" does not match "
                     "\"rank\": \\d+ : " +
                         line.substr(0, 200));
    }
    return;
  }
  violations.add("rank-line", "no line contains \"rank\"");
}

void check_slice_nesting(std::map<TrackKey, std::vector<Slice>>& slices_by_track,
                         const TraceJson& events, ViolationList& violations) {
  for (auto& [track, slices] : slices_by_track) {
    // Parents first: by start, and among equal starts the longer slice.
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return a.begin_ns != b.begin_ns ? a.begin_ns < b.begin_ns : a.end_ns > b.end_ns;
    });
    std::vector<const Slice*> open_slices;
    for (const auto& slice : slices) {
      while (!open_slices.empty() && open_slices.back()->end_ns <= slice.begin_ns) {
        open_slices.pop_back();
      }
      if (!open_slices.empty() && slice.end_ns > open_slices.back()->end_ns) {
        const Slice& parent = *open_slices.back();
        violations.add("nesting",
                       "pid " + track.first + " tid " + track.second + ": " +
                           describe_event(events[slice.event_index], slice.event_index) + " [" +
                           std::to_string(slice.begin_ns) + ", " + std::to_string(slice.end_ns) +
                           ") ns overlaps " +
                           describe_event(events[parent.event_index], parent.event_index) + " [" +
                           std::to_string(parent.begin_ns) + ", " + std::to_string(parent.end_ns) +
                           ") ns without nesting");
        continue;  // keep the stack as the consumers would: the offender is not a parent
      }
      open_slices.push_back(&slice);
    }
  }
}

// The same nesting once ts and ts + dur are float64: at ts ~ 1e12 us a double holds about
// 1 ns, so a child that ends with its parent can end after it. TensorBoard's op tree then
// reports "ranges on the same thread should not intersect" and drops the op.
void check_float64_nesting(std::map<TrackKey, std::vector<Slice>>& slices_by_track, const TraceJson& events,
                           ViolationList& violations) {
  for (auto& [track, slices] : slices_by_track) {
    std::sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
      return a.begin_us != b.begin_us ? a.begin_us < b.begin_us : a.end_us > b.end_us;
    });
    std::vector<const Slice*> open_slices;
    for (const auto& slice : slices) {
      while (!open_slices.empty() && open_slices.back()->end_us <= slice.begin_us) open_slices.pop_back();
      if (!open_slices.empty() && slice.end_us > open_slices.back()->end_us) {
        const Slice& parent = *open_slices.back();
        char slice_end[32], parent_end[32];
        std::snprintf(slice_end, sizeof(slice_end), "%.17g", slice.end_us);
        std::snprintf(parent_end, sizeof(parent_end), "%.17g", parent.end_us);
        violations.add("float64-nesting", "pid " + track.first + " tid " + track.second + ": " +
                                              describe_event(events[slice.event_index], slice.event_index) +
                                              " ends at " + slice_end + " us, after its enclosing " +
                                              describe_event(events[parent.event_index], parent.event_index) +
                                              " at " + parent_end + " us");
        continue;
      }
      open_slices.push_back(&slice);
    }
  }
}

void check_events(const TraceJson& events, ViolationList& violations) {
  static const std::regex kProfilerStepName(R"(ProfilerStep#\d+)");
  std::map<TrackKey, std::vector<Slice>> slices_by_track;
  std::map<std::uint64_t, std::size_t> event_index_by_external_id;
  bool has_profiler_step = false;

  for (std::size_t index = 0; index < events.size(); ++index) {
    const auto& event = events[index];
    const std::string where = describe_event(event, index);
    if (!event.is_object()) {
      violations.add("event", where + " is not an object");
      continue;
    }
    for (const auto& item : event.items()) {
      if (item.value().is_array()) {
        violations.add("array-key", where + " has array-valued top-level key \"" + item.key() +
                                        "\" (Perfetto rejects the file; arrays belong in args)");
      }
    }
    if (!event.contains("name") || !event["name"].is_string()) {
      violations.add("name",
                     where + " has no string \"name\" (the TB plugin reads it on every event)");
    }
    if (!event.contains("ph") || !event["ph"].is_string()) {
      violations.add("ph", where + " has no string \"ph\"");
      continue;
    }
    const std::string phase = event["ph"].get<std::string>();
    if (phase != "M" && (!event.contains("ts") || !event["ts"].is_number())) {
      violations.add("ts", where + " (ph " + phase + ") has no numeric \"ts\"");
    }
    if (phase == "M") {
      for (const auto* key : {"pid", "tid"}) {
        if (!event.contains(key) || !is_track_id(event[key])) {
          violations.add("metadata", where + " has no valid \"" + key + "\"");
        }
      }
      if (!event.contains("args") || !event["args"].is_object()) {
        violations.add("metadata", where + " has no \"args\" object");
      }
      continue;
    }
    if (phase != "X") continue;

    bool complete = true;
    for (const auto* key : {"cat", "name", "pid", "tid", "ts", "dur", "args"}) {
      if (!event.contains(key)) {
        violations.add("complete-event", where + " lacks \"" + key + "\"");
        complete = false;
      }
    }
    if (!complete) continue;
    if (!event["cat"].is_string()) {
      violations.add("complete-event", where + " has a non-string \"cat\"");
      continue;
    }
    if (!is_track_id(event["pid"]) || !is_track_id(event["tid"])) {
      violations.add("complete-event", where + " has a pid/tid that is neither uint32 nor string");
      continue;
    }
    if (!event["ts"].is_number() || !event["dur"].is_number()) {
      violations.add("complete-event", where + " has a non-numeric ts or dur");
      continue;
    }
    if (!event["args"].is_object()) {
      violations.add("complete-event", where + " has non-object \"args\"");
      continue;
    }
    const std::int64_t begin_ns = microseconds_to_ns(event["ts"]);
    const std::int64_t duration_ns = microseconds_to_ns(event["dur"]);
    if (begin_ns < 0 || duration_ns < 0) {
      violations.add("complete-event", where + " has a negative ts or dur (Kineto clamps to 0)");
      continue;
    }
    const double begin_us = static_cast<double>(event["ts"].get<long double>());
    slices_by_track[{event["pid"].dump(), event["tid"].dump()}].push_back(
        {begin_ns, begin_ns + duration_ns, index, begin_us,
         begin_us + static_cast<double>(event["dur"].get<long double>())});

    const std::string category = event["cat"].get<std::string>();
    const auto& args = event["args"];
    if (is_cpu_category(category) && args.contains("stream")) {
      violations.add(
          "cpu-stream",
          where + " (" + category + ") carries a \"stream\" arg; HTA would take it for GPU work");
    }
    if (category != "cpu_op" && category != "user_annotation") continue;

    if (category == "user_annotation" &&
        std::regex_match(event["name"].get<std::string>(), kProfilerStepName)) {
      has_profiler_step = true;
    }
    const bool has_ids = args.contains("External id") && args["External id"].is_number_unsigned() &&
                         args.contains("Record function id") &&
                         args["Record function id"].is_number_unsigned();
    if (!has_ids) {
      violations.add("ids", where + " lacks integer \"External id\" and \"Record function id\"");
      continue;
    }
    const auto external_id = args["External id"].get<std::uint64_t>();
    const auto record_function_id = args["Record function id"].get<std::uint64_t>();
    if (external_id != record_function_id) {
      violations.add("ids", where + ": External id " + std::to_string(external_id) +
                                " != Record function id " + std::to_string(record_function_id));
    }
    if (record_function_id == 0) {
      violations.add("ids", where + ": Record function id is 0 (Chakra cannot link it)");
    }
    const auto [previous, inserted] = event_index_by_external_id.emplace(external_id, index);
    if (!inserted) {
      violations.add("ids", where + ": External id " + std::to_string(external_id) +
                                " already used by " +
                                describe_event(events[previous->second], previous->second));
    }
  }

  if (!has_profiler_step) {
    violations.add("profiler-step",
                   "no ProfilerStep#N user_annotation (HTA iterations, "
                   "Chakra's critical path and the TB step view need one)");
  }
  check_slice_nesting(slices_by_track, events, violations);
  check_float64_nesting(slices_by_track, events, violations);
}

}  // namespace

std::string read_trace_text(const std::filesystem::path& path) {
  if (starts_with_gzip_magic(path)) return inflate_gzip_file(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::runtime_error("cannot read " + path.string());
  return std::move(text).str();
}

std::vector<std::string> validate_trace_text(const std::string& text) {
  ViolationList violations;
  TraceJson trace;
  try {
    trace = TraceJson::parse(text);
  } catch (const TraceJson::parse_error& error) {
    violations.add("json", std::string("not valid JSON: ") + error.what());
    return std::move(violations).take();
  }
  if (!trace.is_object()) {
    violations.add("json", "the document is not a JSON object");
    return std::move(violations).take();
  }
  check_top_level(trace, violations);
  check_rank_line(text, violations);
  if (trace.contains("traceEvents") && trace["traceEvents"].is_array()) {
    check_events(trace["traceEvents"], violations);
  }
  return std::move(violations).take();
}

std::vector<std::string> validate_trace_file(const std::filesystem::path& path) {
  std::string text;
  try {
    text = read_trace_text(path);
  } catch (const std::exception& error) {
    return {std::string("[file] ") + error.what()};
  }
  std::vector<std::string> violations;
  const bool named_gzip = path.extension() == ".gz";
  if (named_gzip != starts_with_gzip_magic(path)) {
    violations.push_back("[file] " + path.filename().string() +
                         (named_gzip ? " is named .gz but is not gzip data"
                                     : " holds gzip data but is not named .gz"));
  }
  auto document_violations = validate_trace_text(text);
  violations.insert(violations.end(), document_violations.begin(), document_violations.end());
  return violations;
}

namespace {

// The element types of "GenericList[Int,Int]" or "Tuple[...]"; nullopt for any other type.
std::optional<std::vector<std::string>> list_element_types(const std::string& type) {
  for (const std::string_view prefix : {"GenericList[", "Tuple["}) {
    if (!type.starts_with(prefix) || !type.ends_with(']')) continue;
    std::vector<std::string> elements;
    const std::string inside = type.substr(prefix.size(), type.size() - prefix.size() - 1);
    int depth = 0;
    std::string element;
    for (const char c : inside) {
      depth += c == '[' || c == '(' ? 1 : c == ']' || c == ')' ? -1 : 0;
      if (c == ',' && depth == 0) {
        elements.push_back(element);
        element.clear();
      } else {
        element += c;
      }
    }
    if (!inside.empty()) elements.push_back(element);
    return elements;
  }
  return std::nullopt;
}

bool is_tensor_tuple(const nlohmann::json& value) {
  if (!value.is_array() || value.size() != 6) return false;
  for (size_t i = 0; i < 5; ++i)
    if (!value[i].is_number_integer()) return false;
  return value[5].is_string();
}

// Whether `value` has the form convertIValue gives a value of `type`; `why` says what is off.
bool value_fits_type(const nlohmann::json& value, const std::string& type, std::string* why) {
  if (type == "Unknown" || value == "<Unknown>") {
    *why = "a placeholder where torch records a value";
    return false;
  }
  bool fits = true;
  if (type.starts_with("Tensor(")) fits = is_tensor_tuple(value);
  else if (type == "Int") fits = value.is_number_integer();
  else if (type == "Double") fits = value.is_number() || value == "inf" || value == "-inf" || value == "nan";
  else if (type == "Bool") fits = value.is_boolean();
  else if (type == "String" || type == "Device") fits = value.is_string();
  else if (type == "None") fits = value == "<None>";
  else if (const auto elements = list_element_types(type)) {
    if (!value.is_array() || value.size() != elements->size()) {
      *why = "a list of " + std::to_string(elements->size()) + " elements expected";
      return false;
    }
    for (size_t i = 0; i < elements->size(); ++i)
      if (!value_fits_type(value[i], (*elements)[i], why)) return false;
    return true;
  } else {
    fits = value == "<" + type + ">";  // an object torch shows by its type alone: "<Generator>"
  }
  if (!fits) *why = "not the form torch gives a " + type;
  return fits;
}

void check_value_arrays(const nlohmann::json& node, const char* side, ViolationList& violations) {
  const std::string where = "node " + node.value("name", std::string("?")) + " " + side;
  if (!node.contains(side) || !node[side].is_object()) {
    violations.add("et-arrays", where + " is not an object");
    return;
  }
  const nlohmann::json& arrays = node[side];
  for (const char* key : {"values", "shapes", "types", "strides"}) {
    if (!arrays.contains(key) || !arrays[key].is_array()) {
      violations.add("et-arrays", where + "." + key + " is not an array");
      return;
    }
  }
  const size_t count = arrays["values"].size();
  if (arrays["shapes"].size() != count || arrays["types"].size() != count || arrays["strides"].size() != count) {
    violations.add("et-arrays", where + ": values, shapes, types and strides differ in length");
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    const nlohmann::json& type = arrays["types"][i];
    std::string why;
    if (!type.is_string()) {
      violations.add("et-value-type", where + "[" + std::to_string(i) + "]: the type is not a string");
    } else if (!value_fits_type(arrays["values"][i], type.get<std::string>(), &why)) {
      violations.add(type == "Unknown" || arrays["values"][i] == "<Unknown>" ? "et-placeholder" : "et-value-type",
                     where + "[" + std::to_string(i) + "] " + arrays["values"][i].dump() + " of type " + type.dump() +
                         ": " + why);
    }
  }
}

}  // namespace

std::vector<std::string> validate_execution_trace(const nlohmann::json& et) {
  ViolationList violations;
  if (!et.contains("nodes") || !et["nodes"].is_array()) {
    violations.add("et-arrays", "no nodes array");
    return std::move(violations).take();
  }
  for (const nlohmann::json& node : et["nodes"]) {
    check_value_arrays(node, "inputs", violations);
    check_value_arrays(node, "outputs", violations);
  }
  return std::move(violations).take();
}

TraceJson load_trace(const std::filesystem::path& path) {
  return TraceJson::parse(read_trace_text(path));
}

NameCounts complete_event_name_counts(const TraceJson& trace, std::string_view category) {
  NameCounts counts;
  if (!trace.contains("traceEvents")) return counts;
  for (const auto& event : trace["traceEvents"]) {
    const auto has_string = [&event](const char* key) {
      return event.contains(key) && event[key].is_string();
    };
    if (event.is_object() && has_string("ph") && has_string("cat") && has_string("name") &&
        event["ph"] == "X" && event["cat"].get<std::string>() == category) {
      ++counts[event["name"].get<std::string>()];
    }
  }
  return counts;
}

}  // namespace tprof::test
