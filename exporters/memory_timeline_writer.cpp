#include "exporters/memory_timeline_writer.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <tuple>
#include <utility>

#include "exporters/chart_js.h"
#include "exporters/json_writer.h"

namespace tprof::exporters {
namespace {

constexpr std::string_view kOptimizerStepPrefix = "Optimizer.step#";

// torch's storages: 0 is none, 1 a storage without data (model::TensorValue).
bool is_storage(uint64_t address) { return address > 1; }

// An op that writes its first argument in place: torch's trailing-underscore convention
// (aten::add_, aten::mul_, aten::addcmul_, aten::copy_).
bool writes_first_argument(const model::ClosedOp& closed) {
  const std::string& name = closed.op.name;
  return closed.op.kind == model::RangeKind::kOperator && name.size() > 1 && name.back() == '_' &&
         !closed.span.inputs.empty() && closed.span.inputs.front().kind == model::ValueKind::kTensor;
}

// The bytes of its storage a tensor reaches: up to the last element its sizes and strides
// address (a broadcast view, stride 0, reaches no further than its one row).
int64_t reached_bytes(const model::TensorValue& tensor) {
  int64_t last = 0;
  if (tensor.strides.size() == tensor.sizes.size()) {
    for (size_t dim = 0; dim < tensor.sizes.size(); ++dim) {
      if (tensor.sizes[dim] == 0) return 0;
      last += (tensor.sizes[dim] - 1) * tensor.strides[dim];
    }
  } else {
    last = tensor.numel - 1;
  }
  return (tensor.storage_offset + last + 1) * static_cast<int64_t>(tensor.itemsize);
}

template <typename Visit>
void for_each_tensor(const model::Value& value, Visit visit) {
  if (value.kind == model::ValueKind::kTensor) visit(value.tensor);
  if (value.kind == model::ValueKind::kTensorList)
    for (const model::TensorValue& tensor : value.tensors) visit(tensor);
}

}  // namespace

void MemoryTimelineWriter::note_sizes(const model::OpSpan& span) {
  const auto note = [&](const model::TensorValue& tensor) {
    if (!is_storage(tensor.storage_address) || tensor.device != "cpu") return;
    const int64_t bytes = reached_bytes(tensor);
    if (storage_bytes_.size() >= kMaxStorages && !storage_bytes_.contains(tensor.storage_address)) return;
    int64_t& known = storage_bytes_[tensor.storage_address];
    known = std::max(known, bytes);
  };
  for (const model::Value& value : span.inputs) for_each_tensor(value, note);
  for (const model::Value& value : span.outputs) for_each_tensor(value, note);
}

void MemoryTimelineWriter::op(const model::ClosedOp& closed) {
  const model::OpSpan& span = closed.span;
  OpFacts facts;
  if (span.arguments_recorded) {
    note_sizes(span);
    const bool writes = writes_first_argument(closed);
    for (size_t i = 0; i < span.inputs.size(); ++i)
      for_each_tensor(span.inputs[i], [&](const model::TensorValue& tensor) {
        if (is_storage(tensor.storage_address))
          ((writes && i == 0) ? facts.written : facts.read).push_back(tensor.storage_address);
      });
  }
  facts.start_ns = span.start_ns;
  std::vector<OpFacts>& waiting = waiting_[closed.tid];
  waiting.push_back(std::move(facts));
  const bool optimizer_step =
      closed.op.kind == model::RangeKind::kUserAnnotation && closed.op.name.starts_with(kOptimizerStepPrefix);
  if (optimizer_step) {
    // What closed since it began ran inside it (a range closes after what it encloses).
    const auto inside = std::find_if(waiting.begin(), waiting.end(),
                                     [&](const OpFacts& waiting_facts) { return waiting_facts.start_ns >= span.start_ns; });
    for (auto facts_inside = inside; facts_inside != waiting.end(); ++facts_inside) settle(*facts_inside, true);
    waiting.erase(inside, waiting.end());
  }
  // Outside every range now, or too many waiting: the rest ran outside every Optimizer.step.
  if (span.depth == 0 || waiting.size() > kMaxWaitingFacts) {
    for (const OpFacts& outside : waiting) settle(outside, false);
    waiting.clear();
  }
}

void MemoryTimelineWriter::settle(const OpFacts& facts, bool in_optimizer_step) {
  const auto add = [&](std::unordered_set<uint64_t>& set, uint64_t storage) {
    if (set.size() < kMaxStorages) set.insert(storage);
  };
  for (const uint64_t storage : facts.written) add(in_optimizer_step ? written_in_step_ : used_outside_step_, storage);
  for (const uint64_t storage : facts.read) add(in_optimizer_step ? read_in_step_ : used_outside_step_, storage);
}

// "aten::empty at conv.py(459): _conv_forward": what a hover shows of an event.
uint32_t MemoryTimelineWriter::label_of(const model::MemoryEvent& event) {
  std::string text = event.range_name ? *event.range_name : std::string();
  if (event.stack && !event.stack->empty()) text += (text.empty() ? "" : " at ") + model::frame_label(event.stack->front());
  if (text.empty()) return 0;
  const auto known = label_ids_.find(text);
  if (known != label_ids_.end()) return known->second;
  if (labels_.size() >= kMaxLabels) return 0;
  labels_.push_back(text);
  return label_ids_.emplace(std::move(text), static_cast<uint32_t>(labels_.size() - 1)).first->second;
}

void MemoryTimelineWriter::memory(const model::MemoryEvent& event) {
  if (event.device_type != 0) return;
  if (events_.size() >= kMaxEvents) {
    ++events_left_out_;
    return;
  }
  events_.push_back({event.time_ns / 1000, event.address, event.bytes, label_of(event)});
  if (event.bytes > 0 && allocated_.size() < kMaxStorages) allocated_.insert(event.address);
}

MemoryTimelineWriter::Category MemoryTimelineWriter::category_of(uint64_t storage) const {
  const bool used_outside = used_outside_step_.contains(storage);
  if (written_in_step_.contains(storage)) return used_outside ? kParameter : kOptimizerState;
  if (read_in_step_.contains(storage) && !used_outside) return kGradient;
  return kUnknown;
}

// A row per distinct microsecond, each the running bytes of every category.
MemoryTimelineWriter::Timeline MemoryTimelineWriter::coalesce() const {
  Timeline timeline;
  const auto row_at = [&](uint64_t time_us, uint32_t label) -> Row& {
    if (timeline.rows.empty() || timeline.times.back() != time_us) {
      timeline.times.push_back(time_us);
      timeline.rows.push_back(timeline.rows.empty() ? Row{} : timeline.rows.back());
      timeline.labels.push_back(0);
    }
    if (label != 0) timeline.labels.back() = label;
    return timeline.rows.back();
  };
  if (!events_.empty() || !storage_bytes_.empty()) {
    // What was there before: at the first time, as torch counts its PREEXISTING tensors.
    Row& first = row_at(events_.empty() ? 0 : events_.front().time_us, 0);
    for (const auto& [storage, bytes] : storage_bytes_)
      if (!allocated_.contains(storage)) first[1 + category_of(storage)] += bytes;
  }
  for (const Event& event : events_) row_at(event.time_us, event.label)[1 + category_of(event.address)] += event.bytes;
  return timeline;
}

void MemoryTimelineWriter::finish(const model::RunSummary&) {
  const Timeline timeline = coalesce();
  html_ ? write_html(timeline) : write_json(timeline);
}

void MemoryTimelineWriter::write_json(const Timeline& timeline) {
  std::string text = "[[";
  for (size_t i = 0; i < timeline.times.size(); ++i) {
    if (i > 0) text += ", ";
    append_json_integer(text, timeline.times[i]);
  }
  text += "], [";
  for (size_t i = 0; i < timeline.rows.size(); ++i) {
    if (i > 0) text += ", ";
    append_json_integer_list(text, timeline.rows[i], ", ");
    if (text.size() > (1 << 20)) {
      out_.write(text);
      text.clear();
    }
  }
  text += "]]\n";
  out_.write(text);
}

namespace {

// torch's names and colours (_memory_profiler.py _CATEGORY_TO_COLORS), in its order.
constexpr std::array<std::pair<std::string_view, std::string_view>, MemoryTimelineWriter::kCategoryCount>
    kCategoryStyle = {{{"parameter", "darkgreen"},
                       {"optimizer state", "goldenrod"},
                       {"input", "black"},
                       {"temporary", "mediumpurple"},
                       {"activation", "red"},
                       {"gradient", "mediumblue"},
                       {"autograd detail", "royalblue"},
                       {"unknown", "grey"}}};

// The page's script: stacked areas of the categories that hold any bytes, a marker at the peak,
// and the op and line of each time in the tooltip. It notes what it drew on <body> (its series
// and points) for a reader without eyes, such as the e2e test's headless browser.
constexpr std::string_view kPlotScript = R"js(
const mib = (bytes) => bytes / 1048576;
const datasets = timeline.series.filter((series) => series.bytes.some((b) => b !== 0)).map((series, i) => ({
  label: series.name, backgroundColor: series.color, borderColor: series.color, borderWidth: 1, pointRadius: 0,
  stepped: true, fill: i === 0 ? 'origin' : '-1',
  data: series.bytes.map((b, j) => ({x: timeline.times_ms[j], y: mib(b)}))}));
datasets.push({type: 'scatter', label: 'peak: ' + mib(timeline.peak.bytes).toFixed(2) + ' MiB',
  data: [{x: timeline.times_ms[timeline.peak.index], y: mib(timeline.peak.bytes)}], pointRadius: 7,
  pointStyle: 'triangle', backgroundColor: 'crimson', borderColor: 'crimson', stack: 'peak'});
const chart = new Chart(document.getElementById('timeline'), {type: 'line', data: {datasets},
  options: {animation: false, responsive: true, maintainAspectRatio: false, parsing: false, normalized: true,
    interaction: {mode: 'nearest', axis: 'x', intersect: false},
    scales: {x: {type: 'linear', title: {display: true, text: 'time since the first event (ms)'}},
             y: {stacked: true, beginAtZero: true, title: {display: true, text: 'MiB allocated'}}},
    plugins: {tooltip: {callbacks: {footer: (items) => items.length ? timeline.labels[timeline.row_labels[items[0].dataIndex]] || '' : ''}}}}});
document.getElementById('peak').textContent = 'Peak ' + mib(timeline.peak.bytes).toFixed(2) + ' MiB at ' +
  timeline.times_ms[timeline.peak.index].toFixed(3) + ' ms: ' + (timeline.labels[timeline.row_labels[timeline.peak.index]] || '');
document.body.dataset.series = chart.data.datasets.map((d) => d.label).join('|');
document.body.dataset.points = String(timeline.times_ms.length);
)js";

}  // namespace

void MemoryTimelineWriter::write_html(const Timeline& timeline) {
  // Thinned to kMaxPlotPoints, the peak's row kept.
  size_t peak = 0;
  int64_t peak_bytes = 0;
  for (size_t i = 0; i < timeline.rows.size(); ++i) {
    int64_t total = 0;
    for (size_t category = 1; category < timeline.rows[i].size(); ++category) total += timeline.rows[i][category];
    if (total > peak_bytes) std::tie(peak, peak_bytes) = std::pair{i, total};
  }
  const size_t stride = timeline.rows.size() / kMaxPlotPoints + 1;
  std::vector<size_t> kept;
  for (size_t i = 0; i < timeline.rows.size(); ++i)
    if (i % stride == 0 || i == peak) kept.push_back(i);
  const uint64_t start_us = timeline.times.empty() ? 0 : timeline.times.front();
  std::string data = "const timeline = {\"times_ms\": [";
  for (size_t k = 0; k < kept.size(); ++k) {
    if (k > 0) data += ", ";
    data += std::to_string(static_cast<double>(timeline.times[kept[k]] - start_us) / 1e3);
  }
  data += "], \"row_labels\": [";
  for (size_t k = 0; k < kept.size(); ++k) {
    if (k > 0) data += ", ";
    append_json_integer(data, timeline.labels[kept[k]]);
  }
  data += "], \"labels\": [";
  for (size_t label = 0; label < labels_.size(); ++label) {
    if (label > 0) data += ", ";
    append_json_string(data, labels_[label]);
  }
  data += "], \"series\": [";
  for (size_t category = 0; category < kCategoryCount; ++category) {
    data += category == 0 ? "{\"name\": " : ", {\"name\": ";
    append_json_string(data, kCategoryStyle[category].first);
    data += ", \"color\": ";
    append_json_string(data, kCategoryStyle[category].second);
    data += ", \"bytes\": [";
    for (size_t k = 0; k < kept.size(); ++k) {
      if (k > 0) data += ", ";
      append_json_integer(data, timeline.rows[kept[k]][1 + category]);
    }
    data += "]}";
  }
  data += "], \"peak\": {\"index\": ";
  append_json_integer(data, static_cast<uint64_t>(std::find(kept.begin(), kept.end(), peak) - kept.begin()));
  data += ", \"bytes\": ";
  append_json_integer(data, peak_bytes);
  data += "}};\n";
  out_.write(R"(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>tprof memory timeline</title>
<style>body{font-family:sans-serif;margin:16px} #plot{position:relative;height:80vh}</style>
<script>)");
  out_.write(kChartJs);
  out_.write(R"(</script></head>
<body><h3>CPU memory by category (tprof --memory-timeline)</h3><p id="peak"></p>
<div id="plot"><canvas id="timeline"></canvas></div>
<script>
)");
  out_.write(data);
  out_.write(kPlotScript);
  out_.write("</script></body></html>\n");
}

}  // namespace tprof::exporters
