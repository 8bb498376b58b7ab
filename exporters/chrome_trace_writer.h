// Writes a Kineto-compatible Chrome trace (../shared/docs/formats.md §2, §5) as the ranges
// arrive: Kineto's top-level key order, relative microsecond timestamps with 3 decimals
// against a 3-month-floored baseTimeNanoseconds, process/thread metadata, cpu_op,
// user_annotation and python_function slices, fwdbwd flows and [memory] instants, one event
// per line. Events come in the order the sink receives them (ranges as they close); every consumer sorts.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "exporters/output_file.h"
#include "exporters/value_text_cache.h"
#include "model/trace_model.h"
#include "model/trace_sink.h"

namespace tprof::exporters {

// Kineto's ChromeTraceBaseTime: unix ns floored to a 7,889,238-second quantum.
uint64_t chrome_trace_base_time_ns(uint64_t unix_ns);

// "<int us>.<3-digit ns>" of a non-negative ns offset; negative offsets clamp to "0.000".
std::string format_relative_us(int64_t offset_ns);

// Appends the "dur" of a slice from `start_offset_ns` to `end_offset_ns` (relative to the base
// time; a negative start was clamped to ts 0) so that a reader adding it to ts as float64 gets
// the double nearest the exact end: with decimals beyond the nanosecond where that takes them,
// still reading as the exact integer ns. Slices then nest as float64 as they do exactly.
void append_float64_safe_duration(std::string& out, int64_t start_offset_ns, int64_t end_offset_ns);

// The "traceName" of a trace written to `path`: its base name.
std::string chrome_trace_name(const std::string& path);

// Everything after the last event: the "Record Window End" instant, the end of traceEvents,
// "deviceProperties" (by device index), "tprof_summary" and "traceName". `tprof recover` ends a
// partial file with it too.
std::string chrome_trace_tail(int64_t window_end_relative_ns, const model::RunSummary& summary,
                              const std::vector<model::DeviceProperties>& devices, const std::string& trace_name);

// `trace_name` goes into the top-level "traceName" (the output file's base name).
// baseTimeNanoseconds derives from the window start. Does not commit `out`.
class ChromeTraceWriter final : public model::TraceSink {
 public:
  ChromeTraceWriter(OutputFile& out, std::string trace_name);

  void begin(const model::SessionInfo& session) override;
  void thread(const model::ThreadInfo& thread) override;
  void op(const model::ClosedOp& op) override;
  void python_span(uint32_t tid, const model::PythonSpan& span) override;
  void flow(const model::ForwardBackwardFlow& flow) override;
  void device_activity(const model::DeviceActivity& activity) override;
  void device_properties(const model::DeviceProperties& device) override;
  void memory(const model::MemoryEvent& event) override;
  void flush() override;
  void finish(const model::RunSummary& summary) override;

 private:
  void write_header();
  template <typename AppendValue>
  void write_metadata_event(std::string_view name, uint32_t pid, uint32_t tid, std::string_view arg_key,
                            AppendValue append_value);
  void write_api_call(const model::DeviceActivity& call);
  void write_probed_api_call(const model::ClosedOp& call);
  void append_kernel_args(const model::DeviceActivity& kernel);
  void announce_gpu_row(uint32_t device, uint32_t row, bool is_stream);
  void write_flow_event(std::string_view phase, std::string_view category, uint64_t id, uint32_t pid, uint32_t tid,
                        uint64_t ts_ns);
  void begin_event(std::string_view category, std::string_view name, uint32_t pid, uint32_t tid, uint64_t start_ns,
                   uint64_t end_ns);
  void append_float64_safe_duration(uint64_t start_ns, uint64_t end_ns);
  void append_place(uint32_t pid, uint32_t tid, uint64_t time_ns);
  void append_true_arg(std::string_view key);
  void end_slice();
  const std::string& call_stack_json(const model::PythonStack& stack);

  OutputFile& out_;
  const std::string trace_name_;
  model::SessionInfo session_;
  uint64_t base_time_ns_ = 0;
  std::string line_;  // one event at a time, reused so that writing allocates nothing per event
  uint64_t next_event_index_ = 0;  // "Ev Idx": position among the CPU events, as PyTorch counts
  std::unordered_map<const model::PythonStack*, std::string> call_stacks_;
  ValueTextCache input_args_;  // the record_shapes args of ops' inputs
  std::set<uint32_t> gpu_devices_;                         // announced GPU processes
  std::set<std::tuple<uint32_t, uint32_t, bool>> gpu_rows_;  // announced (device, row, is stream)
  std::vector<model::DeviceProperties> devices_;           // written at finish: they come after begin
};

// The whole trace, replayed through a ChromeTraceWriter. Does not commit `out`.
void write_chrome_trace(const model::Trace& trace, const std::string& trace_name, OutputFile& out);

}  // namespace tprof::exporters
