// The end-of-run table, as torch.profiler's key_averages().table() prints it: per operator (and
// input shapes, with group_by_input_shape) the calls, self and total CPU time, their share of
// all self time, and the average; and with --memory, as with profile_memory=True, the CPU memory
// each allocated, with and without what it encloses. Totals are gathered as ranges close, or from a saved trace
// (`tprof report`).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/self_time.h"
#include "model/trace_sink.h"

namespace tprof {

struct OperatorTotals {
  std::string name;
  std::string input_shapes;  // grouped by input shape: "[[4, 8], [8, 3]]"; "" otherwise
  uint64_t calls = 0;
  uint64_t self_ns = 0;   // time in the op minus time in the ranges it encloses
  uint64_t total_ns = 0;
  uint64_t flops = 0;     // with_flops's estimate, summed over the calls
  // --memory: CPU bytes allocated less freed while it ran, with what it encloses and without.
  int64_t cpu_memory_bytes = 0;
  int64_t self_cpu_memory_bytes = 0;
  int64_t device_memory_bytes = 0;  // CUDA Mem, Self CUDA Mem
  int64_t self_device_memory_bytes = 0;
};

struct SummaryOptions {
  // torch's sort_by keys: self_cpu_time_total, cpu_time_total, cpu_time (the average), count,
  // and with --memory cpu_memory_usage, self_cpu_memory_usage, and a device's
  // cuda_memory_usage and self_cuda_memory_usage (device_memory_usage, self_device_memory_usage).
  std::string sort = "self_cpu_time_total";
  size_t row_limit = 10;
  bool group_by_shape = false;  // one row per (name, Input Dims), as group_by_input_shape=True
};

// torch's _format_memory: "1.50 Mb", "-512 b" (binary units, torch's names).
std::string format_memory(int64_t bytes);

// Whether `key` is a sort key the table knows.
bool is_summary_sort_key(const std::string& key);

// A range's memory: CPU and device bytes allocated less freed, with and without what it encloses.
struct RangeMemory {
  int64_t cpu = 0, self_cpu = 0, device = 0, self_device = 0;
};

// Totals by operator name: overloads (add.Tensor, add.Scalar) share one row, as in
// torch.profiler's key_averages().
class OperatorTotalsTable {
 public:
  explicit OperatorTotalsTable(bool group_by_shape = false) : group_by_shape_(group_by_shape) {}
  void add(const std::string& name, const std::string& input_shapes, uint64_t self_ns, uint64_t total_ns,
           uint64_t flops = 0, const RangeMemory& memory = {});
  // A [memory] event outside every range: torch's "[memory]" row counts them as its calls.
  void add_unattributed_memory(int64_t bytes, bool device);
  // Memory was recorded: the table shows torch's CPU Mem and Self CPU Mem columns; and a
  // device's: CUDA Mem and Self CUDA Mem.
  void show_memory() { shows_memory_ = true; }
  void show_device_memory() { shows_device_memory_ = true; }
  bool shows_memory() const { return shows_memory_; }
  bool shows_device_memory() const { return shows_device_memory_; }
  // Sorted by `options.sort` (largest first, then by name), at most `options.row_limit` rows.
  std::vector<OperatorTotals> rows(const SummaryOptions& options) const;
  uint64_t self_ns_total() const { return self_ns_total_; }
  bool grouped_by_shape() const { return group_by_shape_; }

 private:
  bool group_by_shape_;
  bool shows_memory_ = false;
  bool shows_device_memory_ = false;
  std::unordered_map<std::string, OperatorTotals> by_key_;
  uint64_t self_ns_total_ = 0;
};

// torch's table layout: right-aligned columns under a dashed rule, then "Self CPU time total";
// a "Total <unit>FLOPs" column where some op has a FLOPs estimate.
std::string format_summary_table(const OperatorTotalsTable& table, const SummaryOptions& options);

// Feeds the table as ranges close.
class OperatorTotalsSink final : public model::TraceSink {
 public:
  explicit OperatorTotalsSink(bool group_by_shape = false) : table_(group_by_shape) {}
  void begin(const model::SessionInfo&) override {}
  void thread(const model::ThreadInfo&) override {}
  void op(const model::ClosedOp& op) override;
  void python_span(uint32_t, const model::PythonSpan&) override {}
  void flow(const model::ForwardBackwardFlow&) override {}
  void memory(const model::MemoryEvent& event) override;
  void finish(const model::RunSummary&) override {}

  const OperatorTotalsTable& table() const { return table_; }

 private:
  OperatorTotalsTable table_;
  model::SelfTimes self_times_;
};

}  // namespace tprof
