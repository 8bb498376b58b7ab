#include "exporters/chrome_trace_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "exporters/chrome_input_args.h"
#include "exporters/json_writer.h"
#include "model/trace_sink.h"

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

// GPU rows sort after every CPU process (Kineto's kExceedMaxPid).
constexpr uint64_t kGpuSortIndexBase = 5'000'000;

void append_relative_us(std::string& out, int64_t offset_ns) {
  if (offset_ns < 0) offset_ns = 0;  // Kineto clamps too (output_json.cpp transToRelativeTime)
  append_json_integer(out, offset_ns / 1000);
  const auto fraction = static_cast<int>(offset_ns % 1000);
  out += '.';
  out += static_cast<char>('0' + fraction / 100);
  out += static_cast<char>('0' + fraction / 10 % 10);
  out += static_cast<char>('0' + fraction % 10);
}

// The number a consumer that reads JSON numbers as float64 (Python, JavaScript) gets for the
// text append_relative_us writes for `offset_ns`. That text is offset_ns / 1000 exactly, and
// both a correct decimal parse and IEEE division round that one rational number to the nearest
// double, so below 2^53 ns (104 days past the base time) division gives it without parsing.
double relative_us_as_float64(int64_t offset_ns) {
  if (offset_ns < 0) offset_ns = 0;
  constexpr int64_t kExactlyRepresentable = int64_t{1} << 53;
  if (offset_ns < kExactlyRepresentable) return static_cast<double>(offset_ns) / 1000.0;
  std::string text;
  append_relative_us(text, offset_ns);
  double value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

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

// A float as fmt's "{}" writes it, as Kineto does: the shortest text that reads back the same.
void append_shortest_float(std::string& out, float value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof(text), value);
  out.append(text, error == std::errc() ? end : text);
}

// Kineto's deviceProperties (DeviceProperties.cpp): one object per GPU, the array index being
// the device index (TensorBoard's plugin looks devices up by it), on one line.
void append_device_properties(std::string& out, std::vector<model::DeviceProperties> devices) {
  std::sort(devices.begin(), devices.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  out += '[';
  for (const model::DeviceProperties& device : devices) {
    if (&device != devices.data()) out += ", ";
    out += "{\"id\": ";
    append_json_integer(out, device.id);
    out += ", \"name\": ";
    append_json_string(out, device.name);
    const std::pair<const char*, uint64_t> fields[] = {
        {"totalGlobalMem", device.total_global_memory},
        {"computeMajor", device.compute_major},
        {"computeMinor", device.compute_minor},
        {"maxThreadsPerBlock", device.max_threads_per_block},
        {"maxThreadsPerMultiprocessor", device.max_threads_per_multiprocessor},
        {"regsPerBlock", device.registers_per_block},
        {"warpSize", device.warp_size},
        {"sharedMemPerBlock", device.shared_memory_per_block},
        {"numSms", device.multiprocessors},
        {"regsPerMultiprocessor", device.registers_per_multiprocessor},
        {"sharedMemPerBlockOptin", device.shared_memory_per_block_optin},
        {"sharedMemPerMultiprocessor", device.shared_memory_per_multiprocessor}};
    for (const auto& [key, value] : fields) {
      out += ", \"";
      out += key;
      out += "\": ";
      append_json_integer(out, value);
    }
    out += '}';
  }
  out += ']';
}

}  // namespace

ChromeTraceWriter::ChromeTraceWriter(OutputFile& out, std::string trace_name)
    : out_(out), trace_name_(std::move(trace_name)) {}

void ChromeTraceWriter::begin(const model::SessionInfo& session) {
  session_ = session;
  base_time_ns_ = chrome_trace_base_time_ns(session.base_time_unix_ns != 0 ? session.base_time_unix_ns
                                                                           : session.window_start_unix_ns);
  write_header();
  write_metadata_event("process_name", session_.pid, 0, "name", [&] { append_json_string(line_, session_.process_name); });
  write_metadata_event("process_labels", session_.pid, 0, "labels", [&] { line_ += "\"CPU\""; });
  write_metadata_event("process_sort_index", session_.pid, 0, "sort_index",
                       [&] { append_json_integer(line_, session_.pid); });
}

// Every top-level value before traceEvents sits on its own line. Nothing before
// distributedInfo may contain "rank": the HTA that Chakra pins takes the rank from the first
// line containing that word, with the regex `"rank": \d+` (formats.md §2.2). The tprof block
// (host name, library path: free text) therefore comes after it. Only what is known at the
// start is here; the end-of-run facts, and deviceProperties (the CUPTI library sends them once
// tprof has attached), follow traceEvents (see finish).
void ChromeTraceWriter::write_header() {
  line_.assign("{\n  \"schemaVersion\": 1,\n");
  line_ += "  \"distributedInfo\": {\"backend\": \"\", \"rank\": ";
  append_json_integer(line_, std::max<int64_t>(session_.rank, 0));
  line_ += ", \"world_size\": ";
  append_json_integer(line_, session_.world_size);
  line_ += "},\n";
  line_ += "  \"tprof\": {\"version\": ";
  append_json_string(line_, session_.tprof_version);
  // The trace's pid is the one tprof saw; a process in a container knows itself by another.
  line_ += ", \"pid\": ";
  append_json_integer(line_, session_.pid);
  line_ += ", \"namespace_pid\": ";
  append_json_integer(line_, session_.namespace_pid != 0 ? session_.namespace_pid : session_.pid);
  line_ += ", \"hostname\": ";
  append_json_string(line_, session_.hostname);
  line_ += ", \"attach_time_unix_ns\": ";
  append_json_integer(line_, session_.attach_unix_ns);
  line_ += ", \"window_start_unix_ns\": ";
  append_json_integer(line_, session_.window_start_unix_ns);
  line_ += ", \"torch_library\": ";
  append_json_string(line_, session_.torch_library);
  line_ += ", \"python_version\": ";
  append_json_string(line_, session_.python_version);
  line_ += ", \"tensor_layout\": ";
  append_json_string(line_, session_.tensor_layout);
  line_ += ", \"gpu\": ";
  append_json_string(line_, session_.gpu);
  line_ += "},\n";
  // Kineto's flags for whether ops carry Input Dims and FLOPs (profiler_kineto.cpp); tprof
  // estimates FLOPs whenever it records shapes, as with_flops=True does.
  line_ += session_.tensor_layout.empty() ? "  \"with_flops\": 0,\n  \"record_shapes\": 0,"
                                          : "  \"with_flops\": 1,\n  \"record_shapes\": 1,";
  line_ += "\n  \"displayTimeUnit\": \"ms\",\n";
  line_ += "  \"baseTimeNanoseconds\": ";
  append_json_integer(line_, base_time_ns_);
  line_ += ",\n  \"traceEvents\": [\n";
  out_.write(line_);
}

// Kineto's per-thread rows (formats.md §2.4), stamped at the window start.
void ChromeTraceWriter::thread(const model::ThreadInfo& thread) {
  write_metadata_event("thread_name", session_.pid, thread.tid, "name", [&] {
    append_json_string(line_, "thread " + std::to_string(thread.tid) + " (" + thread.name + ")");
  });
  write_metadata_event("thread_sort_index", session_.pid, thread.tid, "sort_index",
                       [&] { append_json_integer(line_, thread.tid); });
}

template <typename AppendValue>
void ChromeTraceWriter::write_metadata_event(std::string_view name, uint32_t pid, uint32_t tid, std::string_view arg_key,
                                             AppendValue append_value) {
  line_.assign("  {\"name\": \"");
  line_ += name;
  line_ += "\", \"ph\": \"M\", \"ts\": ";
  append_relative_us(line_, signed_difference_ns(session_.window_start_unix_ns, base_time_ns_));
  line_ += ", \"pid\": ";
  append_json_integer(line_, pid);
  line_ += ", \"tid\": ";
  append_json_integer(line_, tid);
  line_ += ", \"args\": {\"";
  line_ += arg_key;
  line_ += "\": ";
  append_value();
  line_ += "}},\n";
  out_.write(line_);
}

// profiler_kineto.cpp AddTensorboardFields: "Python parent id" (null at the top),
// "Python id", and "Python module id" on nn.Module calls; and "Qualified name" where co_qualname
// says more than the name. No External id: python_function events are not ops.
void ChromeTraceWriter::python_span(uint32_t tid, const model::PythonSpan& span) {
  begin_event("python_function", span.name, session_.pid, tid, span.start_ns, span.end_ns);
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
  if (!span.qualified_name.empty()) {  // tprof's own: torch names the frame by co_name alone
    line_ += ", \"Qualified name\": ";
    append_json_string(line_, span.qualified_name);
  }
  line_ += ", \"Ev Idx\": ";
  append_json_integer(line_, next_event_index_++);
  end_slice();
}

void ChromeTraceWriter::op(const model::ClosedOp& closed) {
  const model::OpSpan& span = closed.span;
  if (closed.op.kind == model::RangeKind::kCudaRuntime || closed.op.kind == model::RangeKind::kCudaDriver) {
    write_probed_api_call(closed);
    return;
  }
  const bool is_annotation =
      closed.op.kind == model::RangeKind::kUserAnnotation || closed.op.kind == model::RangeKind::kWaitCounter;
  begin_event(is_annotation ? "user_annotation" : "cpu_op", closed.op.name, session_.pid, closed.tid, span.start_ns,
              span.end_ns);
  // Kineto's External id and Record function id are both the op's id (formats.md §1.1).
  line_ += "\"External id\": ";
  append_json_integer(line_, span.record_id);
  line_ += ", \"Record function id\": ";
  append_json_integer(line_, span.record_id);
  line_ += ", \"Ev Idx\": ";
  append_json_integer(line_, next_event_index_++);
  if (span.arguments_recorded) input_args_.append(line_, span.inputs, append_input_args);
  if (span.flops != 0) {
    line_ += ", \"flops\": ";
    append_json_integer(line_, span.flops);
  }
  // Kineto writes these only for a sequence number >= 0 (formats.md §2.5.1).
  if (span.sequence_number >= 0) {
    line_ += ", \"Sequence number\": ";
    append_json_integer(line_, span.sequence_number);
    line_ += ", \"Fwd thread id\": ";
    append_json_integer(line_, span.forward_thread);
  }
  if (!closed.op.source_file.empty()) {
    line_ += ", \"Kernel file\": ";
    append_json_string(line_, closed.op.source_file);
  }
  if (const std::string* reason = model::recompile_reason(closed)) {
    line_ += ", \"" + std::string(model::kRecompileReasonArg) + "\": ";
    append_json_string(line_, *reason);
  }
  if (closed.stack) {
    line_ += ", \"Call stack\": ";
    line_ += call_stack_json(*closed.stack);
  }
  if (span.closed_at_stop) append_true_arg(kClosedAtStopArg);
  if (span.return_missing) append_true_arg(kReturnMissingArg);
  if (span.unwound) append_true_arg(kUnwoundArg);
  end_slice();
}

// GPU activity (formats.md §2.5.4-2.5.7, 2.5.10): API calls on their CPU thread, kernels,
// copies, memsets and syncs on a track per device (pid) and stream (tid), and an ac2g arrow from
// each launching call to what it launched, both ends written with the GPU event.
void ChromeTraceWriter::device_activity(const model::DeviceActivity& activity) {
  using Kind = model::DeviceActivityKind;
  if (activity.kind == Kind::kRuntime || activity.kind == Kind::kDriver) {
    write_api_call(activity);
    return;
  }
  // A sync of a whole context has no stream: it goes on a row of its context.
  const uint32_t row = activity.stream >= 0 ? static_cast<uint32_t>(activity.stream) : activity.context;
  announce_gpu_row(activity.device, row, activity.stream >= 0);
  const std::string_view category = activity.kind == Kind::kKernel   ? "kernel"
                                    : activity.kind == Kind::kMemcpy ? "gpu_memcpy"
                                    : activity.kind == Kind::kMemset ? "gpu_memset"
                                                                     : "cuda_sync";
  begin_event(category, activity.name, activity.device, row, activity.start_ns, activity.end_ns);
  if (activity.kind == Kind::kSync) {
    line_ += "\"cuda_sync_kind\": ";
    append_json_string(line_, activity.name);
    line_ += ", ";
  } else if (activity.external_id != 0) {
    line_ += "\"External id\": ";
    append_json_integer(line_, activity.external_id);
    line_ += ", ";
  }
  if (activity.kind == Kind::kKernel) line_ += "\"queued\": 0, ";
  line_ += "\"device\": ";
  append_json_integer(line_, activity.device);
  line_ += ", \"context\": ";
  append_json_integer(line_, activity.context);
  line_ += ", \"stream\": ";
  append_json_integer(line_, activity.stream);
  line_ += ", \"correlation\": ";
  append_json_integer(line_, activity.correlation);
  if (activity.kind == Kind::kKernel) append_kernel_args(activity);
  if (activity.kind == Kind::kMemcpy || activity.kind == Kind::kMemset) {
    line_ += ", \"bytes\": ";
    append_json_integer(line_, activity.bytes);
    // HEAD Kineto leaves the bandwidth out of zero-length copies.
    if (activity.end_ns > activity.start_ns) {
      char bandwidth[32];
      std::snprintf(bandwidth, sizeof bandwidth, "%.6g",
                    static_cast<double>(activity.bytes) / static_cast<double>(activity.end_ns - activity.start_ns));
      line_ += ", \"memory bandwidth (GB/s)\": ";
      line_ += bandwidth;
    }
  }
  end_slice();
  if (activity.launch_tid != 0) {
    write_flow_event("s", "ac2g", activity.correlation, session_.pid, activity.launch_tid, activity.launch_start_ns);
    write_flow_event("f", "ac2g", activity.correlation, activity.device, row, activity.start_ns);
  }
}

// Kineto's kernel args, in its order. Where the device's properties are unknown, "blocks per
// SM" says so as Kineto does ("inf") and the figures derived from it are left out.
void ChromeTraceWriter::append_kernel_args(const model::DeviceActivity& kernel) {
  line_ += ", \"registers per thread\": ";
  append_json_integer(line_, kernel.registers_per_thread);
  line_ += ", \"shared memory\": ";
  append_json_integer(line_, kernel.shared_memory);
  if (kernel.has_occupancy) {
    line_ += ", \"blocks per SM\": ";
    append_shortest_float(line_, kernel.blocks_per_sm);
    line_ += ", \"warps per SM\": ";
    append_shortest_float(line_, kernel.warps_per_sm);
  } else {
    line_ += ", \"blocks per SM\": \"inf\"";
  }
  line_ += ", \"grid\": [";
  for (size_t i = 0; i < 3; ++i) {
    if (i > 0) line_ += ", ";
    append_json_integer(line_, kernel.grid[i]);
  }
  line_ += "], \"block\": [";
  for (size_t i = 0; i < 3; ++i) {
    if (i > 0) line_ += ", ";
    append_json_integer(line_, kernel.block[i]);
  }
  line_ += ']';
  if (kernel.achieved_occupancy_percent >= 0) {
    line_ += ", \"est. achieved occupancy %\": ";
    append_json_integer(line_, kernel.achieved_occupancy_percent);
  }
}

void ChromeTraceWriter::device_properties(const model::DeviceProperties& device) { devices_.push_back(device); }

// formats.md §2.5.11: Kineto's [memory] instant (profiler_kineto.cpp, MemoryEventData), its
// args in Kineto's order. The TensorBoard plugin's memory view reads these.
void ChromeTraceWriter::memory(const model::MemoryEvent& event) {
  line_.assign(R"(  {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]")");
  append_place(session_.pid, event.tid, event.time_ns);
  line_ += R"(, "args": {"Device Type": )";
  append_json_integer(line_, static_cast<int>(event.device_type));
  line_ += R"(, "Device Id": )";
  append_json_integer(line_, static_cast<int>(event.device_index));
  line_ += R"(, "Addr": )";
  append_json_integer(line_, event.address);
  line_ += R"(, "Bytes": )";
  append_json_integer(line_, event.bytes);
  line_ += R"(, "Total Allocated": )";
  append_json_integer(line_, event.total_allocated);
  line_ += R"(, "Total Reserved": )";
  append_json_integer(line_, event.total_reserved);
  line_ += R"(, "Ev Idx": )";
  append_json_integer(line_, next_event_index_++);
  end_slice();
}

// A runtime or driver call on its thread: External id only inside an op, never a stream (HTA
// would take it for a GPU event).
void ChromeTraceWriter::write_api_call(const model::DeviceActivity& call) {
  begin_event(call.kind == model::DeviceActivityKind::kRuntime ? "cuda_runtime" : "cuda_driver", call.name,
              session_.pid, call.tid, call.start_ns, call.end_ns);
  if (call.external_id != 0) {
    line_ += "\"External id\": ";
    append_json_integer(line_, call.external_id);
    line_ += ", ";
  }
  line_ += "\"cbid\": ";
  append_json_integer(line_, call.cbid);
  line_ += ", \"correlation\": ";
  append_json_integer(line_, call.correlation);
  end_slice();
}

// A CUDA API call seen by its uprobe, without CUPTI: on its thread, with the External id of the
// range around it; no cbid or correlation (CUPTI's), and nothing on a GPU row to link to.
void ChromeTraceWriter::write_probed_api_call(const model::ClosedOp& call) {
  const model::OpSpan& span = call.span;
  begin_event(call.op.kind == model::RangeKind::kCudaRuntime ? "cuda_runtime" : "cuda_driver", call.op.name,
              session_.pid, call.tid, span.start_ns, span.end_ns);
  if (span.parent_record_id != 0) {
    line_ += "\"External id\": ";
    append_json_integer(line_, span.parent_record_id);
  }
  end_slice();
}

// Kineto's rows for a device (formats.md §2.4), the first time it or one of its streams shows.
void ChromeTraceWriter::announce_gpu_row(uint32_t device, uint32_t row, bool is_stream) {
  if (gpu_devices_.insert(device).second) {
    write_metadata_event("process_name", device, 0, "name", [&] { append_json_string(line_, session_.process_name); });
    write_metadata_event("process_labels", device, 0, "labels",
                         [&] { append_json_string(line_, "GPU " + std::to_string(device)); });
    write_metadata_event("process_sort_index", device, 0, "sort_index",
                         [&] { append_json_integer(line_, uint64_t{device} + kGpuSortIndexBase); });
  }
  if (!gpu_rows_.insert({device, row, is_stream}).second) return;
  write_metadata_event("thread_name", device, row, "name", [&] {
    append_json_string(line_, (is_stream ? "stream " : "context ") + std::to_string(row) + " ");
  });
  write_metadata_event("thread_sort_index", device, row, "sort_index", [&] { append_json_integer(line_, row); });
}

// "Call stack": the op's Python frames, innermost first, "file(line): function" joined by
// ";" (torch's stacksToStr), with the executing line of each frame; as a JSON string, built
// once per distinct stack (ops share a few thousand stacks).
const std::string& ChromeTraceWriter::call_stack_json(const model::PythonStack& stack) {
  auto [entry, is_new] = call_stacks_.try_emplace(&stack);
  if (is_new) {
    std::string joined;
    for (const model::PythonFrame& frame : stack) {
      if (!joined.empty()) joined += ';';
      joined += model::frame_label(frame);
    }
    append_json_string(entry->second, joined);
  }
  return entry->second;
}

// An X event up to the opening of its args object. Kineto's key order ph, cat, name, pid,
// tid, ts, dur, args.
void ChromeTraceWriter::begin_event(std::string_view category, std::string_view name, uint32_t pid, uint32_t tid,
                                    uint64_t start_ns, uint64_t end_ns) {
  line_.assign("  {\"ph\": \"X\", \"cat\": \"");
  line_ += category;
  line_ += "\", \"name\": ";
  append_json_string(line_, name);
  append_place(pid, tid, start_ns);
  line_ += ", \"dur\": ";
  append_float64_safe_duration(start_ns, end_ns);
  line_ += ", \"args\": {";
}

void ChromeTraceWriter::append_float64_safe_duration(uint64_t start_ns, uint64_t end_ns) {
  exporters::append_float64_safe_duration(line_, signed_difference_ns(start_ns, base_time_ns_),
                                          signed_difference_ns(end_ns, base_time_ns_));
}

// `, "pid": P, "tid": T, "ts": µs`: where and when an event happens.
void ChromeTraceWriter::append_place(uint32_t pid, uint32_t tid, uint64_t time_ns) {
  line_ += ", \"pid\": ";
  append_json_integer(line_, pid);
  line_ += ", \"tid\": ";
  append_json_integer(line_, tid);
  line_ += ", \"ts\": ";
  append_relative_us(line_, signed_difference_ns(time_ns, base_time_ns_));
}

void ChromeTraceWriter::append_true_arg(std::string_view key) {
  line_ += ", ";
  append_json_string(line_, key);
  line_ += ": true";
}

void ChromeTraceWriter::end_slice() {
  line_ += "}},\n";
  out_.write(line_);
}

// formats.md §2.5.8: an "s" on the forward op and an "f" (binding to the enclosing slice)
// on the backward node, ids from 1, as collection.cpp generateForwardBackwardLink writes them.
void ChromeTraceWriter::flow(const model::ForwardBackwardFlow& flow) {
  write_flow_event("s", "fwdbwd", flow.id, session_.pid, flow.forward_tid, flow.forward_start_ns);
  write_flow_event("f", "fwdbwd", flow.id, session_.pid, flow.backward_tid, flow.backward_start_ns);
}

// `category` is also the flow's name, as Kineto writes both (Perfetto keys flows by id, cat and
// name).
void ChromeTraceWriter::write_flow_event(std::string_view phase, std::string_view category, uint64_t id, uint32_t pid,
                                         uint32_t tid, uint64_t ts_ns) {
  line_.assign("  {\"ph\": \"");
  line_ += phase;
  line_ += "\", \"id\": ";
  append_json_integer(line_, id);
  append_place(pid, tid, ts_ns);
  line_ += ", \"cat\": \"";
  line_ += category;
  line_ += "\", \"name\": \"";
  line_ += category;
  line_ += '"';
  if (phase == "f") line_ += ", \"bp\": \"e\"";
  line_ += "},\n";
  out_.write(line_);
}

void ChromeTraceWriter::flush() { out_.flush(); }

void ChromeTraceWriter::finish(const model::RunSummary& summary) {
  out_.write(chrome_trace_tail(signed_difference_ns(summary.window_end_unix_ns, base_time_ns_), summary, devices_,
                               trace_name_));
}

uint64_t chrome_trace_base_time_ns(uint64_t unix_ns) {
  constexpr uint64_t kQuantumNs = kBaseTimeQuantumSeconds * kNanosecondsPerSecond;
  return unix_ns / kQuantumNs * kQuantumNs;
}

std::string format_relative_us(int64_t offset_ns) {
  std::string text;
  append_relative_us(text, offset_ns);
  return text;
}

// The duration, as a reader that takes JSON numbers as float64 (TensorBoard's op tree, HTA)
// adds it to ts: at ts ~ 1e12 us a double resolves ~1 ns, so ts + dur written exactly can
// land a double above the exact end, and a child ending with its parent, or a slice ending
// where its sibling starts, then overlaps it (TensorBoard drops such ops). Where that would
// happen, dur gets more decimals: a value within half a nanosecond of the exact one (it still
// reads as the same integer ns) whose sum with ts is the double nearest the exact end. Every
// slice's float64 end is then a monotonic function of its exact end, so nesting holds.
void append_float64_safe_duration(std::string& out, int64_t start_offset_ns, int64_t end_offset_ns) {
  // Saturated: offsets at the ends of int64 (a clock far off the window's) must not overflow.
  int64_t duration_ns = 0;
  if (end_offset_ns > start_offset_ns && __builtin_sub_overflow(end_offset_ns, start_offset_ns, &duration_ns))
    duration_ns = std::numeric_limits<int64_t>::max();
  if (start_offset_ns < 0) {  // ts was clamped to 0: Kineto keeps dur as it is
    append_relative_us(out, duration_ns);
    return;
  }
  const double ts_us = relative_us_as_float64(start_offset_ns);
  const double end_us = relative_us_as_float64(end_offset_ns);
  if (ts_us + relative_us_as_float64(duration_ns) == end_us) {
    append_relative_us(out, duration_ns);
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
  if (ts_us + adjusted_us == end_us && reads_as_exact_ns) {
    out += adjusted;
  } else {
    append_relative_us(out, duration_ns);
  }
}

std::string chrome_trace_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

namespace {

// `"probe_cost": {...}`: the measured trap costs and the estimate (model::ProbeCost), in ns.
void append_probe_cost(std::string& out, const model::ProbeCost& cost) {
  char text[384];
  std::snprintf(text, sizeof(text),
                ", \"probe_cost\": {\"trap_ns\": {\"emulated_entry\": %.0f, \"stepped_entry\": %.0f, \"return\": %.0f}, "
                "\"interrupt_ns\": %.0f, \"sampling_ns\": %.0f, \"ranges\": %llu, ",
                cost.emulated_entry_ns, cost.stepped_entry_ns, cost.return_ns, cost.interrupt_ns, cost.sampling_ns,
                static_cast<unsigned long long>(cost.ranges));
  out += text;
  if (cost.measured)
    out += "\"traps\": {\"entry\": " + std::to_string(cost.measured->entry_traps) +
           ", \"return\": " + std::to_string(cost.measured->return_traps) +
           ", \"stepped\": " + std::to_string(cost.measured->stepped_traps) +
           "}, \"bpf_run_ns\": " + std::to_string(cost.measured->bpf_run_ns) +
           ", \"moving_probes_ns\": " + std::to_string(cost.measured->moving_probes_ns) + ", ";
  std::snprintf(text, sizeof(text), "\"estimate_ns\": %.0f, \"target_cpu_ns\": %llu}", cost.estimate_ns,
                static_cast<unsigned long long>(cost.target_cpu_ns));
  out += text;
}

// `"op_windows": {...}`: --max-overhead's windows and coverage (model::OpWindows).
void append_op_windows(std::string& out, const model::OpWindows& windows) {
  char text[512];
  std::snprintf(text, sizeof(text),
                ", \"op_windows\": {\"max_overhead\": %.4f, \"windows\": %llu, \"most_sites_linked\": %llu, "
                "\"sites_attached\": %llu, \"exact_steps\": %llu, \"steps_seen\": %llu",
                windows.max_slowdown, static_cast<unsigned long long>(windows.windows),
                static_cast<unsigned long long>(windows.most_sites_linked),
                static_cast<unsigned long long>(windows.sites_attached),
                static_cast<unsigned long long>(windows.exact_steps),
                static_cast<unsigned long long>(windows.steps_seen));
  out += text;
  if (const auto& cost = windows.step_cost) {
    std::snprintf(text, sizeof(text),
                  ", \"step_cost\": {\"steps_inside\": %llu, \"steps_outside\": %llu, \"cpu_inside_ns\": %llu, "
                  "\"cpu_outside_ns\": %llu, \"excess_inside_ns\": %.0f, \"estimated_inside_ns\": %.0f, "
                  "\"cpu_in_pauses_ns\": %llu, \"estimated_rest_ns\": %.0f}",
                  static_cast<unsigned long long>(cost->steps_inside), static_cast<unsigned long long>(cost->steps_outside),
                  static_cast<unsigned long long>(cost->cpu_inside_ns), static_cast<unsigned long long>(cost->cpu_outside_ns),
                  cost->excess_inside_ns, cost->estimated_inside_ns,
                  static_cast<unsigned long long>(cost->cpu_in_pauses_ns), cost->estimated_rest_ns);
    out += text;
  }
  if (windows.estimated_slowdown) {
    std::snprintf(text, sizeof(text), ", \"estimated_slowdown\": %.4f", *windows.estimated_slowdown);
    out += text;
  }
  out += "}";
}

// The largest groups of blocks the summary names; --memory-stacks has all the peak's.
constexpr size_t kPeakHoldersInSummary = 10;

// The largest groups of blocks, as objects: bytes, blocks, the op and the stack's frames.
void append_holders(std::string& out, const std::vector<model::MemoryHolder>& holders) {
  const size_t shown = std::min(holders.size(), kPeakHoldersInSummary);
  for (size_t i = 0; i < shown; ++i) {
    const model::MemoryHolder& holder = holders[i];
    out += i == 0 ? "{\"bytes\": " : ", {\"bytes\": ";
    append_json_integer(out, holder.bytes);
    out += ", \"blocks\": ";
    append_json_integer(out, holder.blocks);
    out += ", \"op\": ";
    append_json_string(out, holder.op);
    out += ", \"stack\": [";
    for (size_t frame = 0; frame < holder.stack.size(); ++frame) {
      if (frame > 0) out += ", ";
      append_json_string(out, model::frame_label(holder.stack[frame]));
    }
    out += "]}";
  }
}

// `"memory": {...}`: --memory's counts, the peak, who held it, and in a --schedule cycle what
// earlier cycles left live (model::MemorySummary).
void append_memory_summary(std::string& out, const model::MemorySummary& memory) {
  char text[512];
  std::snprintf(text, sizeof(text),
                ", \"memory\": {\"allocations\": %llu, \"frees\": %llu, \"frees_of_unknown_blocks\": %llu, "
                "\"blocks_forgotten\": %llu, \"peak_allocated_bytes\": %lld, \"peak_unix_ns\": %llu, "
                "\"allocated_at_end\": %lld, \"device_events\": %llu, \"device_peak_allocated_bytes\": %lld, "
                "\"peak_holders\": [",
                static_cast<unsigned long long>(memory.allocations), static_cast<unsigned long long>(memory.frees),
                static_cast<unsigned long long>(memory.frees_of_unknown_blocks),
                static_cast<unsigned long long>(memory.blocks_forgotten),
                static_cast<long long>(memory.peak_allocated_bytes),
                static_cast<unsigned long long>(memory.peak_unix_ns), static_cast<long long>(memory.allocated_at_end),
                static_cast<unsigned long long>(memory.device_events),
                static_cast<long long>(memory.device_peak_allocated_bytes));
  out += text;
  append_holders(out, memory.peak_holders);
  out += "]";
  if (memory.cycle_start_unix_ns != 0) {
    out += ", \"cycle_start_unix_ns\": ";
    append_json_integer(out, memory.cycle_start_unix_ns);
    out += ", \"live_from_earlier_cycles\": [";
    append_holders(out, memory.live_from_earlier_cycles);
    out += "]";
  }
  out += "}";
}

}  // namespace

// Kineto closes traceEvents with this global instant (output_json.cpp finalizeTrace); being
// last, it carries no trailing comma. The end-of-run facts follow, under "tprof_summary".
std::string chrome_trace_tail(int64_t window_end_relative_ns, const model::RunSummary& summary,
                              const std::vector<model::DeviceProperties>& devices, const std::string& trace_name) {
  std::string tail =
      "  {\"ph\": \"i\", \"s\": \"g\", \"name\": \"Record Window End\", \"pid\": \"\", \"tid\": \"\", \"ts\": ";
  append_relative_us(tail, window_end_relative_ns);
  tail += "}\n  ],\n  \"deviceProperties\": ";
  append_device_properties(tail, devices);
  tail += ",\n  \"tprof_summary\": {\"window_end_unix_ns\": ";
  append_json_integer(tail, summary.window_end_unix_ns);
  if (summary.recovered) {
    // Only what the partial file itself shows is known; its counters were never written.
    tail += ", \"recovered\": true";
  } else {
    const std::pair<const char*, uint64_t> counters[] = {
        {"dropped_records", summary.dropped_records},       {"unmatched_returns", summary.unmatched_returns},
        {"late_records", summary.late_records},             {"python_samples", summary.python_samples},
        {"python_stacks_lost", summary.python_stacks_lost}, {"arguments_lost", summary.arguments_lost},
        {"python_timeline_lost", summary.python_timeline_lost},
        {"device_records_dropped", summary.device_records_dropped},
        {"boxed_calls_unnamed", summary.boxed_calls_unnamed},
        {"ops_without_python_stack", summary.ops_without_python_stack},
        {"python_thread_states_not_found", summary.python_thread_states_not_found},
        {"python_thread_search_cut", summary.python_thread_search_cut},
        {"python_stacks_not_copied", summary.python_stacks_not_copied},
        {"python_stacks_unresolved", summary.python_stacks_unresolved}};
    for (const auto& [key, value] : counters) {
      tail += ", \"";
      tail += key;
      tail += "\": ";
      append_json_integer(tail, value);
    }
    if (summary.probe_cost) append_probe_cost(tail, *summary.probe_cost);
    if (summary.op_windows) append_op_windows(tail, *summary.op_windows);
    if (summary.memory) append_memory_summary(tail, *summary.memory);
  }
  tail += "},\n  \"traceName\": ";
  append_json_string(tail, trace_name);
  tail += "\n}\n";
  return tail;
}

void write_chrome_trace(const model::Trace& trace, const std::string& trace_name, OutputFile& out) {
  ChromeTraceWriter writer(out, trace_name);
  model::replay_trace(trace, writer);
}

}  // namespace tprof::exporters
