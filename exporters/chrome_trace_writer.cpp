#include "exporters/chrome_trace_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <queue>
#include <string_view>
#include <utility>
#include <vector>

#include "exporters/chrome_input_args.h"
#include "exporters/json_writer.h"
#include "exporters/start_order.h"

namespace tprof::exporters {
namespace {

// Kineto's ChromeTraceBaseTime (libkineto/src/output_json.h `_trimonths`).
constexpr uint64_t kBaseTimeQuantumSeconds = 7'889'238;
constexpr uint64_t kNanosecondsPerSecond = 1'000'000'000;

// tprof-specific cpu_op args, present (and true) only on spans whose end is not a real
// return. Consumers ignore unknown args; the "tprof: " prefix keeps them apart from PyTorch's.
//   closed at stop:  the op was still running when recording stopped; dur ends at the stop.
//   return missing:  the op's return was never seen (e.g. unwound by an exception); dur ends
//                    at the return of the enclosing op.
constexpr std::string_view kClosedAtStopArg = "tprof: closed at stop";
constexpr std::string_view kReturnMissingArg = "tprof: return missing";
constexpr std::string_view kUnwoundArg = "tprof: unwound";

void append_relative_us(std::string& out, int64_t offset_ns) {
  if (offset_ns < 0) offset_ns = 0;  // Kineto clamps too (output_json.cpp transToRelativeTime)
  append_json_integer(out, offset_ns / 1000);
  const auto fraction = static_cast<int>(offset_ns % 1000);
  out += '.';
  out += static_cast<char>('0' + fraction / 100);
  out += static_cast<char>('0' + fraction / 10 % 10);
  out += static_cast<char>('0' + fraction % 10);
}

// The number a consumer that reads JSON numbers as float64 (Python, JavaScript) gets for `text`.
double as_float64(std::string_view text) {
  double value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// The difference as a signed value, so that times before `origin_ns` clamp to 0 rather than
// wrapping to huge offsets.
int64_t signed_difference_ns(uint64_t time_ns, uint64_t origin_ns) {
  return static_cast<int64_t>(time_ns - origin_ns);
}

// One stream of X events already in start order: the annotations, one thread's python
// spans, or one thread's op spans. The writer merges these streams by start time.
struct SliceStream {
  enum class Kind { kAnnotations, kPythonSpans, kOpSpans };
  Kind kind = Kind::kAnnotations;
  const model::ThreadTrack* thread = nullptr;  // null for the annotation stream
  size_t next = 0;
  size_t position = 0;  // among the streams: the tie-break that keeps the merge stable
};

class ChromeTraceEmitter {
 public:
  ChromeTraceEmitter(const model::Trace& trace, OutputFile& out)
      : trace_(trace),
        out_(out),
        base_time_ns_(chrome_trace_base_time_ns(trace.metadata.window_start_unix_ns)) {}

  void write(const std::string& trace_name) {
    write_header();
    write_metadata_events();
    write_slices();
    write_forward_backward_flows();
    write_footer(trace_name);
  }

 private:
  // Every top-level value before traceEvents sits on its own line. Nothing before
  // distributedInfo may contain "rank": the HTA that Chakra pins takes the rank from the first
  // line containing that word, with the regex `"rank": \d+` (formats.md §2.2). The tprof block
  // (host name, library path: free text) therefore comes after it.
  void write_header() {
    const model::TraceMetadata& metadata = trace_.metadata;
    line_.assign("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n");
    line_ += "  \"distributedInfo\": {\"backend\": \"\", \"rank\": 0, \"world_size\": 1},\n";
    line_ += "  \"tprof\": {\"version\": ";
    append_json_string(line_, metadata.tprof_version);
    line_ += ", \"hostname\": ";
    append_json_string(line_, metadata.hostname);
    line_ += ", \"attach_time_unix_ns\": ";
    append_json_integer(line_, metadata.attach_unix_ns);
    line_ += ", \"window_start_unix_ns\": ";
    append_json_integer(line_, metadata.window_start_unix_ns);
    line_ += ", \"window_end_unix_ns\": ";
    append_json_integer(line_, metadata.window_end_unix_ns);
    line_ += ", \"dropped_records\": ";
    append_json_integer(line_, metadata.dropped_records);
    line_ += ", \"unmatched_returns\": ";
    append_json_integer(line_, metadata.unmatched_returns);
    line_ += ", \"torch_library\": ";
    append_json_string(line_, metadata.torch_library);
    line_ += ", \"python_version\": ";
    append_json_string(line_, metadata.python_version);
    line_ += ", \"python_samples\": ";
    append_json_integer(line_, metadata.python_samples);
    line_ += ", \"python_stacks_lost\": ";
    append_json_integer(line_, metadata.python_stacks_lost);
    line_ += ", \"tensor_layout\": ";
    append_json_string(line_, metadata.tensor_layout);
    line_ += ", \"arguments_lost\": ";
    append_json_integer(line_, metadata.arguments_lost);
    line_ += "},\n";
    // Kineto's flag for whether ops carry Input Dims (profiler_kineto.cpp).
    line_ += metadata.tensor_layout.empty() ? "  \"record_shapes\": 0," : "  \"record_shapes\": 1,";
    line_ += "\n  \"displayTimeUnit\": \"ms\",\n";
    line_ += "  \"baseTimeNanoseconds\": ";
    append_json_integer(line_, base_time_ns_);
    line_ += ",\n  \"traceEvents\": [\n";
    out_.write(line_);
  }

  // Kineto's per-process and per-thread rows (formats.md §2.4), stamped at the window start.
  void write_metadata_events() {
    const model::TraceMetadata& metadata = trace_.metadata;
    write_metadata_event("process_name", 0, "name",
                         [&] { append_json_string(line_, metadata.process_name); });
    write_metadata_event("process_labels", 0, "labels", [&] { line_ += "\"CPU\""; });
    write_metadata_event("process_sort_index", 0, "sort_index",
                         [&] { append_json_integer(line_, metadata.pid); });
    for (const model::ThreadTrack& thread : trace_.threads) {
      write_metadata_event("thread_name", thread.tid, "name", [&] {
        append_json_string(line_,
                           "thread " + std::to_string(thread.tid) + " (" + thread.name + ")");
      });
      write_metadata_event("thread_sort_index", thread.tid, "sort_index",
                           [&] { append_json_integer(line_, thread.tid); });
    }
  }

  template <typename AppendValue>
  void write_metadata_event(std::string_view name, uint32_t tid, std::string_view arg_key,
                            AppendValue append_value) {
    line_.assign("  {\"name\": \"");
    line_ += name;
    line_ += "\", \"ph\": \"M\", \"ts\": ";
    append_relative_us(line_,
                       signed_difference_ns(trace_.metadata.window_start_unix_ns, base_time_ns_));
    line_ += ", \"pid\": ";
    append_json_integer(line_, trace_.metadata.pid);
    line_ += ", \"tid\": ";
    append_json_integer(line_, tid);
    line_ += ", \"args\": {\"";
    line_ += arg_key;
    line_ += "\": ";
    append_value();
    line_ += "}},\n";
    out_.write(line_);
  }

  // A k-way merge of the already-sorted streams, in StartOrderKey order (Kineto's habit, and
  // what viewers need to nest slices): memory stays O(threads) however many events.
  void write_slices() {
    using Kind = SliceStream::Kind;
    std::vector<SliceStream> streams;
    streams.reserve(2 * trace_.threads.size() + 1);
    // Stream order is the tie-break at equal start and end: annotations, then python spans,
    // then ops.
    streams.push_back({.kind = Kind::kAnnotations, .thread = nullptr, .next = 0, .position = 0});
    for (const model::ThreadTrack& thread : trace_.threads)
      streams.push_back({.kind = Kind::kPythonSpans, .thread = &thread, .next = 0, .position = streams.size()});
    for (const model::ThreadTrack& thread : trace_.threads)
      streams.push_back({.kind = Kind::kOpSpans, .thread = &thread, .next = 0, .position = streams.size()});

    using QueueEntry = std::pair<StartOrderKey, SliceStream*>;
    auto comes_later = [](const QueueEntry& a, const QueueEntry& b) { return a.first > b.first; };
    std::priority_queue<QueueEntry, std::vector<QueueEntry>, decltype(comes_later)> queue(
        comes_later);
    auto enqueue_next = [&](SliceStream& stream) {
      if (const auto key = next_key(stream)) queue.emplace(*key, &stream);
    };
    for (SliceStream& stream : streams) enqueue_next(stream);

    while (!queue.empty()) {
      SliceStream& stream = *queue.top().second;
      queue.pop();
      switch (stream.kind) {
        case Kind::kAnnotations: write_annotation(trace_.annotations[stream.next]); break;
        case Kind::kPythonSpans: write_python_span(*stream.thread, stream.thread->python_spans[stream.next]); break;
        case Kind::kOpSpans: write_op_span(*stream.thread, stream.thread->spans[stream.next]); break;
      }
      ++stream.next;
      enqueue_next(stream);
    }
  }

  template <typename Slice>
  static std::optional<StartOrderKey> key_of(const std::vector<Slice>& slices, const SliceStream& stream) {
    if (stream.next == slices.size()) return std::nullopt;
    return StartOrderKey{slices[stream.next].start_ns, slices[stream.next].end_ns, stream.position};
  }

  std::optional<StartOrderKey> next_key(const SliceStream& stream) const {
    switch (stream.kind) {
      case SliceStream::Kind::kAnnotations: return key_of(trace_.annotations, stream);
      case SliceStream::Kind::kPythonSpans: return key_of(stream.thread->python_spans, stream);
      case SliceStream::Kind::kOpSpans: return key_of(stream.thread->spans, stream);
    }
    return std::nullopt;
  }

  // profiler_kineto.cpp AddTensorboardFields: "Python parent id" (null at the top),
  // "Python id", and "Python module id" on nn.Module calls. No External id: python_function
  // events are not ops.
  void write_python_span(const model::ThreadTrack& thread, const model::PythonSpan& span) {
    begin_event("python_function", span.name, thread.tid, span.start_ns, span.end_ns);
    line_ += "\"Python parent id\": ";
    if (span.parent_python_id == 0) {
      line_ += "null";
    } else {
      append_json_integer(line_, span.parent_python_id);
    }
    line_ += ", \"Python id\": ";
    append_json_integer(line_, span.python_id);
    if (span.module_id >= 0) {
      line_ += ", \"Python module id\": ";
      append_json_integer(line_, static_cast<uint64_t>(span.module_id));
    }
    line_ += ", \"Ev Idx\": ";
    append_json_integer(line_, next_event_index_++);
    end_slice();
  }

  void write_op_span(const model::ThreadTrack& thread, const model::OpSpan& span) {
    const model::Operator& op = trace_.operators.at(span.operator_index);
    const bool is_annotation = op.kind == model::RangeKind::kUserAnnotation;
    begin_slice(is_annotation ? "user_annotation" : "cpu_op", op.name, thread.tid, span.start_ns, span.end_ns,
                span.record_id);
    if (span.arguments_recorded) append_input_args(line_, span.inputs);
    // Kineto writes these only for a sequence number >= 0 (formats.md §2.5.1).
    if (span.sequence_number >= 0) {
      line_ += ", \"Sequence number\": ";
      append_json_integer(line_, span.sequence_number);
      line_ += ", \"Fwd thread id\": ";
      append_json_integer(line_, span.forward_thread);
    }
    if (span.python_stack >= 0) append_call_stack(trace_.python_stacks.at(static_cast<size_t>(span.python_stack)));
    if (span.closed_at_stop) append_true_arg(kClosedAtStopArg);
    if (span.return_missing) append_true_arg(kReturnMissingArg);
    if (span.unwound) append_true_arg(kUnwoundArg);
    end_slice();
  }

  // "Call stack": the op's Python frames, innermost first, "file(line): function" joined by
  // ";" (torch's stacksToStr), with the executing line of each frame.
  void append_call_stack(const model::PythonStack& stack) {
    std::string joined;
    for (const model::PythonFrame& frame : stack) {
      if (!joined.empty()) joined += ';';
      joined += frame.file;
      joined += '(';
      joined += std::to_string(frame.line);
      joined += "): ";
      joined += frame.function;
    }
    line_ += ", \"Call stack\": ";
    append_json_string(line_, joined);
  }

  void write_annotation(const model::Annotation& annotation) {
    begin_slice("user_annotation", annotation.name, annotation.tid, annotation.start_ns,
                annotation.end_ns, annotation.record_id);
    end_slice();
  }

  // Kineto's key order ph, cat, name, pid, tid, ts, dur, args; External id and Record function
  // id are both the tprof op id (formats.md §1.1). Leaves the args object open.
  void begin_slice(std::string_view category, std::string_view name, uint32_t tid,
                   uint64_t start_ns, uint64_t end_ns, uint64_t record_id) {
    begin_event(category, name, tid, start_ns, end_ns);
    line_ += "\"External id\": ";
    append_json_integer(line_, record_id);
    line_ += ", \"Record function id\": ";
    append_json_integer(line_, record_id);
    line_ += ", \"Ev Idx\": ";
    append_json_integer(line_, next_event_index_++);
  }

  // An X event up to the opening of its args object.
  void begin_event(std::string_view category, std::string_view name, uint32_t tid, uint64_t start_ns,
                   uint64_t end_ns) {
    line_.assign("  {\"ph\": \"X\", \"cat\": \"");
    line_ += category;
    line_ += "\", \"name\": ";
    append_json_string(line_, name);
    append_place(tid, start_ns);
    // append_place ended the line with the ts value.
    const double ts_us = as_float64(std::string_view(line_).substr(line_.rfind(' ') + 1));
    line_ += ", \"dur\": ";
    append_float64_safe_duration(start_ns, end_ns, ts_us);
    line_ += ", \"args\": {";
  }

  // The duration, as a reader that takes JSON numbers as float64 (TensorBoard's op tree, HTA)
  // adds it to ts: at ts ~ 1e12 us a double resolves ~1 ns, so ts + dur written exactly can
  // land a double above the exact end, and a child ending with its parent, or a slice ending
  // where its sibling starts, then overlaps it (TensorBoard drops such ops). Where that would
  // happen, dur gets more decimals: a value within half a nanosecond of the exact one (it still
  // reads as the same integer ns) whose sum with ts is the double nearest the exact end. Every
  // slice's float64 end is then a monotonic function of its exact end, so nesting holds.
  void append_float64_safe_duration(uint64_t start_ns, uint64_t end_ns, double ts_us) {
    const int64_t duration_ns = std::max<int64_t>(signed_difference_ns(end_ns, start_ns), 0);
    std::string exact;
    append_relative_us(exact, duration_ns);
    if (start_ns < base_time_ns_) {  // ts was clamped to 0: Kineto keeps dur as it is
      line_ += exact;
      return;
    }
    std::string end_text;
    append_relative_us(end_text, signed_difference_ns(end_ns, base_time_ns_));
    const double end_us = as_float64(end_text);
    if (ts_us + as_float64(exact) == end_us) {
      line_ += exact;
      return;
    }
    // end_us - ts_us is exact here (the two are within a factor of two); aim at it, staying
    // less than half a double's spacing from it and as close to the exact duration as that allows.
    const double spacing = std::nextafter(end_us, std::numeric_limits<double>::infinity()) - end_us;
    const double to_end_us = end_us - ts_us;
    const double wanted_us =
        to_end_us + std::clamp(static_cast<double>(duration_ns) / 1000.0 - to_end_us, -0.49 * spacing, 0.49 * spacing);
    char adjusted[48];
    std::snprintf(adjusted, sizeof(adjusted), "%.6f", wanted_us);
    const double adjusted_us = as_float64(adjusted);
    const bool reads_as_exact_ns = std::llround(adjusted_us * 1000.0) == duration_ns;
    line_ += ts_us + adjusted_us == end_us && reads_as_exact_ns ? std::string_view(adjusted) : std::string_view(exact);
  }

  // `, "pid": P, "tid": T, "ts": µs`: where and when an event happens.
  void append_place(uint32_t tid, uint64_t time_ns) {
    line_ += ", \"pid\": ";
    append_json_integer(line_, trace_.metadata.pid);
    line_ += ", \"tid\": ";
    append_json_integer(line_, tid);
    line_ += ", \"ts\": ";
    append_relative_us(line_, signed_difference_ns(time_ns, base_time_ns_));
  }

  void append_true_arg(std::string_view key) {
    line_ += ", ";
    append_json_string(line_, key);
    line_ += ": true";
  }

  void end_slice() {
    line_ += "}},\n";
    out_.write(line_);
  }

  // formats.md §2.5.8: an "s" on the forward op and an "f" (binding to the enclosing slice)
  // on the backward node, ids from 1, as collection.cpp generateForwardBackwardLink writes them.
  void write_forward_backward_flows() {
    uint64_t flow_id = 1;
    for (const model::ForwardBackwardLink& link : trace_.forward_backward_links) {
      const model::ThreadTrack& forward_thread = trace_.threads.at(link.forward_thread_index);
      const model::ThreadTrack& backward_thread = trace_.threads.at(link.backward_thread_index);
      write_flow_event("s", flow_id, forward_thread.tid, forward_thread.spans.at(link.forward_span_index).start_ns);
      write_flow_event("f", flow_id, backward_thread.tid, backward_thread.spans.at(link.backward_span_index).start_ns);
      ++flow_id;
    }
  }

  void write_flow_event(std::string_view phase, uint64_t id, uint32_t tid, uint64_t ts_ns) {
    line_.assign("  {\"ph\": \"");
    line_ += phase;
    line_ += "\", \"id\": ";
    append_json_integer(line_, id);
    append_place(tid, ts_ns);
    line_ += ", \"cat\": \"fwdbwd\", \"name\": \"fwdbwd\"";
    if (phase == "f") line_ += ", \"bp\": \"e\"";
    line_ += "},\n";
    out_.write(line_);
  }

  // Kineto closes traceEvents with this global instant (output_json.cpp finalizeTrace); being
  // last, it carries no trailing comma.
  void write_footer(const std::string& trace_name) {
    line_.assign(
        "  {\"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": \"\", "
        "\"tid\": \"\", \"ts\": ");
    append_relative_us(line_,
                       signed_difference_ns(trace_.metadata.window_end_unix_ns, base_time_ns_));
    line_ += "}\n  ],\n  \"traceName\": ";
    append_json_string(line_, trace_name);
    line_ += "\n}\n";
    out_.write(line_);
  }

  const model::Trace& trace_;
  OutputFile& out_;
  const uint64_t base_time_ns_;
  std::string line_;  // one event at a time, reused so that writing allocates nothing per event
  uint64_t next_event_index_ = 0;
 // "Ev Idx": position among the X events, as PyTorch counts
};

}  // namespace

uint64_t chrome_trace_base_time_ns(uint64_t unix_ns) {
  constexpr uint64_t kQuantumNs = kBaseTimeQuantumSeconds * kNanosecondsPerSecond;
  return unix_ns / kQuantumNs * kQuantumNs;
}

std::string format_relative_us(int64_t offset_ns) {
  std::string text;
  append_relative_us(text, offset_ns);
  return text;
}

void write_chrome_trace(const model::Trace& trace, const std::string& trace_name, OutputFile& out) {
  ChromeTraceEmitter(trace, out).write(trace_name);
}

}  // namespace tprof::exporters
