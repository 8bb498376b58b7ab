#include "userspace/cli/op_summary.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstdio>
#include <functional>

#include "exporters/chrome_input_args.h"

namespace tprof {
namespace {

// torch's _format_time: microseconds as "12.345us", "1.234ms" or "1.234s".
std::string format_time(uint64_t ns) {
  const double us = static_cast<double>(ns) / 1e3;
  char text[32];
  if (us >= 1e6) {
    std::snprintf(text, sizeof(text), "%.3fs", us / 1e6);
  } else if (us >= 1e3) {
    std::snprintf(text, sizeof(text), "%.3fms", us / 1e3);
  } else {
    std::snprintf(text, sizeof(text), "%.3fus", us);
  }
  return text;
}

std::string format_percent(uint64_t part, uint64_t whole) {
  char text[16];
  std::snprintf(text, sizeof(text), "%.2f%%", whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return text;
}

uint64_t average_ns(const OperatorTotals& row) { return row.calls == 0 ? 0 : row.total_ns / row.calls; }

// torch's column limits (max_name_column_width, max_shapes_column_width), with its ellipsis.
std::string truncated(const std::string& text, size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}
constexpr size_t kMaxNameWidth = 55;

// torch's auto_scale_flops: the unit that the smallest estimate reads best in.
std::pair<double, std::string> flops_unit(uint64_t smallest) {
  static const char* const kUnits[] = {"FLOPs", "KFLOPs", "MFLOPs", "GFLOPs", "TFLOPs", "PFLOPs"};
  const double thousands = std::clamp(std::log10(static_cast<double>(smallest)) / 3.0, 0.0, 5.0);
  const auto unit = static_cast<int>(std::floor(thousands));
  return {std::pow(10.0, -3.0 * unit), kUnits[unit]};
}
constexpr size_t kMaxShapesWidth = 80;

std::function<int64_t(const OperatorTotals&)> sort_value(const std::string& key) {
  if (key == "cpu_time_total") return [](const OperatorTotals& row) { return static_cast<int64_t>(row.total_ns); };
  if (key == "cpu_time") return [](const OperatorTotals& row) { return static_cast<int64_t>(average_ns(row)); };
  if (key == "count") return [](const OperatorTotals& row) { return static_cast<int64_t>(row.calls); };
  if (key == "cpu_memory_usage") return [](const OperatorTotals& row) { return row.cpu_memory_bytes; };
  if (key == "self_cpu_memory_usage") return [](const OperatorTotals& row) { return row.self_cpu_memory_bytes; };
  if (key == "cuda_memory_usage" || key == "device_memory_usage")
    return [](const OperatorTotals& row) { return row.device_memory_bytes; };
  if (key == "self_cuda_memory_usage" || key == "self_device_memory_usage")
    return [](const OperatorTotals& row) { return row.self_device_memory_bytes; };
  return [](const OperatorTotals& row) { return static_cast<int64_t>(row.self_ns); };
}

}  // namespace

std::string format_memory(int64_t bytes) {
  constexpr double kKb = 1024, kMb = 1024 * kKb, kGb = 1024 * kMb;
  const double value = static_cast<double>(bytes);
  const double magnitude = std::abs(value);
  char text[32];
  if (magnitude >= kGb) {
    std::snprintf(text, sizeof(text), "%.2f Gb", value / kGb);
  } else if (magnitude >= kMb) {
    std::snprintf(text, sizeof(text), "%.2f Mb", value / kMb);
  } else if (magnitude >= kKb) {
    std::snprintf(text, sizeof(text), "%.2f Kb", value / kKb);
  } else {
    std::snprintf(text, sizeof(text), "%lld b", static_cast<long long>(bytes));
  }
  return text;
}

bool is_summary_sort_key(const std::string& key) {
  return key == "self_cpu_time_total" || key == "cpu_time_total" || key == "cpu_time" || key == "count" ||
         key == "cpu_memory_usage" || key == "self_cpu_memory_usage" || key == "cuda_memory_usage" ||
         key == "self_cuda_memory_usage" || key == "device_memory_usage" || key == "self_device_memory_usage";
}

void OperatorTotalsTable::add(const std::string& name, const std::string& input_shapes, uint64_t self_ns,
                              uint64_t total_ns, uint64_t flops, const RangeMemory& memory) {
  const std::string& shapes = group_by_shape_ ? input_shapes : std::string();
  OperatorTotals& totals = by_key_[shapes.empty() ? name : name + '\n' + shapes];
  if (totals.calls == 0) {
    totals.name = name;
    totals.input_shapes = shapes;
  }
  ++totals.calls;
  totals.self_ns += self_ns;
  totals.total_ns += total_ns;
  totals.flops += flops;
  totals.cpu_memory_bytes += memory.cpu;
  totals.self_cpu_memory_bytes += memory.self_cpu;
  totals.device_memory_bytes += memory.device;
  totals.self_device_memory_bytes += memory.self_device;
  self_ns_total_ += self_ns;
}

void OperatorTotalsTable::add_unattributed_memory(int64_t bytes, bool device) {
  add("[memory]", "", 0, 0, 0, device ? RangeMemory{.device = bytes, .self_device = bytes} : RangeMemory{.cpu = bytes, .self_cpu = bytes});
}

std::vector<OperatorTotals> OperatorTotalsTable::rows(const SummaryOptions& options) const {
  std::vector<OperatorTotals> rows;
  rows.reserve(by_key_.size());
  for (const auto& [key, totals] : by_key_) rows.push_back(totals);
  const auto value = sort_value(options.sort);
  std::sort(rows.begin(), rows.end(), [&](const OperatorTotals& a, const OperatorTotals& b) {
    const int64_t va = value(a), vb = value(b);
    if (va != vb) return va > vb;
    return a.name != b.name ? a.name < b.name : a.input_shapes < b.input_shapes;
  });
  if (rows.size() > options.row_limit) rows.resize(options.row_limit);
  return rows;
}

std::string format_summary_table(const OperatorTotalsTable& table, const SummaryOptions& options) {
  const std::vector<OperatorTotals> rows = table.rows(options);
  std::vector<std::vector<std::string>> cells = {
      {"Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"}};
  if (table.shows_memory()) {
    cells[0].push_back("CPU Mem");
    cells[0].push_back("Self CPU Mem");
  }
  if (table.shows_device_memory()) {
    cells[0].push_back("CUDA Mem");
    cells[0].push_back("Self CUDA Mem");
  }
  cells[0].push_back("# of Calls");
  if (table.grouped_by_shape()) cells[0].push_back("Input Shapes");
  uint64_t smallest_flops = 0;
  for (const OperatorTotals& row : rows)
    if (row.flops > 0 && (smallest_flops == 0 || row.flops < smallest_flops)) smallest_flops = row.flops;
  const auto [flops_scale, flops_name] = smallest_flops > 0 ? flops_unit(smallest_flops) : std::pair<double, std::string>{};
  if (smallest_flops > 0) cells[0].push_back("Total " + flops_name);
  const uint64_t self_total = table.self_ns_total();
  for (const OperatorTotals& row : rows) {
    cells.push_back({truncated(row.name, kMaxNameWidth), format_percent(row.self_ns, self_total), format_time(row.self_ns),
                     format_percent(row.total_ns, self_total), format_time(row.total_ns), format_time(average_ns(row))});
    if (table.shows_memory()) {
      cells.back().push_back(format_memory(row.cpu_memory_bytes));
      cells.back().push_back(format_memory(row.self_cpu_memory_bytes));
    }
    if (table.shows_device_memory()) {
      cells.back().push_back(format_memory(row.device_memory_bytes));
      cells.back().push_back(format_memory(row.self_device_memory_bytes));
    }
    cells.back().push_back(std::to_string(row.calls));
    if (table.grouped_by_shape()) cells.back().push_back(truncated(row.input_shapes, kMaxShapesWidth));
    if (smallest_flops > 0) {
      char flops[32];
      std::snprintf(flops, sizeof(flops), "%8.3f", static_cast<double>(row.flops) * flops_scale);
      cells.back().push_back(row.flops > 0 ? flops : "--");
    }
  }
  std::vector<size_t> widths(cells[0].size(), 12);
  for (const auto& line : cells)
    for (size_t column = 0; column < line.size(); ++column) widths[column] = std::max(widths[column], line[column].size());
  std::string rule;
  for (const size_t width : widths) rule += std::string(width, '-') + "  ";
  rule += '\n';
  std::string text = rule;
  for (size_t line = 0; line < cells.size(); ++line) {
    for (size_t column = 0; column < cells[line].size(); ++column)
      text += std::string(widths[column] - cells[line][column].size(), ' ') + cells[line][column] + "  ";
    text += '\n';
    if (line == 0) text += rule;
  }
  text += rule;
  text += "Self CPU time total: " + format_time(self_total) + '\n';
  return text;
}

void OperatorTotalsSink::op(const model::ClosedOp& closed) {
  const model::OpSpan& span = closed.span;
  const model::SelfTimes::Times times = self_times_.close(span);
  table_.add(closed.op.name, table_.grouped_by_shape() ? exporters::input_dims_text(span.inputs) : std::string(),
             times.self_ns, times.total_ns, span.flops,
             {.cpu = span.cpu_memory_bytes,
              .self_cpu = span.self_cpu_memory_bytes,
              .device = span.device_memory_bytes,
              .self_device = span.self_device_memory_bytes});
}

void OperatorTotalsSink::memory(const model::MemoryEvent& event) {
  const bool device = event.device_type != 0;
  table_.show_memory();
  if (device) table_.show_device_memory();
  if (event.external_id == 0) table_.add_unattributed_memory(event.bytes, device);
}

}  // namespace tprof
