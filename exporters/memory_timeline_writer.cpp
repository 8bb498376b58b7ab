#include "exporters/memory_timeline_writer.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <tuple>
#include <utility>

#include "exporters/chart_js.h"
#include "exporters/json_writer.h"

namespace tprof::exporters {
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
  if (event.device_type == 0) categories_.memory(event, label_of(event));
}

// torch's _coalesce_timeline: a row per distinct microsecond, each the running bytes of every
// category; what was there before counts from the first time.
MemoryTimelineWriter::Timeline MemoryTimelineWriter::coalesce(const std::vector<MemoryCategories::Change>& changes) {
  Timeline timeline;
  int64_t first_us = -1;
  std::vector<int64_t> times;
  for (const MemoryCategories::Change& change : changes) {
    const int64_t time_us = change.time_ns < 0 ? -1 : change.time_ns / 1000;
    if (time_us >= 0 && (first_us < 0 || time_us < first_us)) first_us = time_us;
    if (times.empty() || times.back() != time_us) {
      times.push_back(time_us);
      timeline.rows.push_back(timeline.rows.empty() ? Row{} : timeline.rows.back());
      timeline.labels.push_back(0);
    }
    timeline.rows.back()[1 + static_cast<size_t>(change.category)] += change.bytes;
    if (change.label != 0) timeline.labels.back() = change.label;
  }
  for (const int64_t time_us : times) timeline.times.push_back(static_cast<uint64_t>(time_us < 0 ? std::max<int64_t>(first_us, 0) : time_us));
  return timeline;
}

void MemoryTimelineWriter::finish(const model::RunSummary&) {
  const Timeline timeline = coalesce(categories_.changes());
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
