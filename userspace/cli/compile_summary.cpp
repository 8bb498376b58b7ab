#include "userspace/cli/compile_summary.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <string_view>

namespace tprof {
namespace {

constexpr std::string_view kRegionPrefix = "Torch-Compiled Region: ";
constexpr std::string_view kCompileRange = "_compile.compile_inner (dynamo_timed)";
// torch 2.6 opens these around its compile work, whose ops (tracing with fake tensors) are
// neither compiled code nor eager code.
constexpr std::string_view kCompileWorkSuffix = " (dynamo_timed)";
// The wait counter torch 2.x (2.6 and 2.14 alike) starts around each compile, profiler or not:
// 2.6 around `_compile.compile_inner`, 2.14 around every outermost compile phase, a lazily
// compiled backward's too. tprof records it; torch's profiler does not.
constexpr std::string_view kCompileCounter = "pytorch.wait_counter.dynamo_compile";
// Distinct (op, Python line) pairs kept per level; past it they share one row, so that memory
// stays bounded whatever the code calls.
constexpr size_t kMaxSites = 4096;
// Where the sites past kMaxSites are counted together.
constexpr uint32_t kOtherOps = UINT32_MAX;
constexpr std::string_view kTorchPackage = "-packages/torch/";  // site-packages, dist-packages
// What dynamo names the function it makes of a frame's code after a graph break
// (resume_execution.py): torch_dynamo_resume_in_<function>_at_<line of the break>.
constexpr std::string_view kResumePrefix = "torch_dynamo_resume_in_";
constexpr std::string_view kResumeLine = "_at_";
constexpr size_t kMaxGraphBreaks = 1024;
constexpr size_t kMaxRecompileReasons = 1024;  // distinct texts

std::string milliseconds(uint64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", static_cast<double>(ns) / 1e6);
  return text;
}

std::string percent(uint64_t part, uint64_t whole) {
  char text[16];
  std::snprintf(text, sizeof text, "%.0f%%", whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return text;
}

// The innermost frame outside torch's own package (dynamo's wrappers, Tensor's operator
// methods): the user's line that called in; "" without a stack.
std::string user_line(const model::PythonStack* stack) {
  if (!stack || stack->empty()) return "";
  for (const model::PythonFrame& frame : *stack)
    if (frame.file.find(kTorchPackage) == std::string::npos) return model::frame_label(frame);
  return model::frame_label(stack->front());
}

bool parse_number(std::string_view text, uint64_t* value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

bool parse_compiled_region(const std::string& name, std::pair<uint64_t, uint64_t>* graph) {
  if (!name.starts_with(kRegionPrefix)) return false;
  const std::string_view id = std::string_view(name).substr(kRegionPrefix.size());
  const size_t slash = id.find('/');
  return slash != id.npos && parse_number(id.substr(0, slash), &graph->first) &&
         parse_number(id.substr(slash + 1), &graph->second);
}

void CompileSummarySink::Ops::add(const Site& site, uint64_t calls, uint64_t site_ns) {
  auto found = by_site.find(site);
  if (found == by_site.end()) found = by_site.try_emplace(by_site.size() < kMaxSites ? site : Site{kOtherOps, nullptr}).first;
  found->second.first += calls;
  found->second.second += site_ns;
}

void CompileSummarySink::Ops::add(const Ops& other) {
  ops += other.ops;
  ns += other.ns;
  for (const auto& [site, counts] : other.by_site) add(site, counts.first, counts.second);
}

CompileSummarySink::Ops CompileSummarySink::take_enclosed(std::vector<Ops>& pending, uint32_t depth) {
  Ops enclosed;
  for (size_t level = depth + 1; level < pending.size(); ++level) enclosed.add(pending[level]);
  pending.resize(depth + 1);
  return enclosed;
}

void CompileSummarySink::op(const model::ClosedOp& closed) {
  const model::OpSpan& span = closed.span;
  const uint64_t ns = span.end_ns > span.start_ns ? span.end_ns - span.start_ns : 0;
  std::vector<Ops>& pending = pending_[closed.tid];
  Ops enclosed = take_enclosed(pending, span.depth);
  Ops& level = pending[span.depth];
  std::pair<uint64_t, uint64_t> graph;
  if (closed.op.kind == model::RangeKind::kFunctionRange && parse_compiled_region(closed.op.name, &graph)) {
    Graph& called = graphs_[graph];
    if (called.calls++ == 0) called.called_at = user_line(closed.stack);
    called.ns += ns;
    captured_.ops += enclosed.ops;
    captured_.ns += enclosed.ns;
  } else if (closed.op.kind == model::RangeKind::kOperator) {
    // What an op encloses is not outermost: only the op itself counts.
    if (!op_names_.contains(span.operator_index)) op_names_.emplace(span.operator_index, closed.op.name);
    ++level.ops;
    level.ns += ns;
    level.add({span.operator_index, closed.stack}, 1, ns);
  } else if (closed.op.kind == model::RangeKind::kCompiledKernel) {
    ++kernel_calls_;
    kernel_ns_ += ns;
    if (kernels_.size() < kMaxSites) kernels_.insert(closed.op.name);
    level.add(enclosed);
  } else if (closed.op.kind == model::RangeKind::kWaitCounter && closed.op.name == kCompileCounter) {
    counted_compiles_.add(ns);
    if (const std::string* reason = model::recompile_reason(closed)) recompile_reason(*reason);
  } else if (closed.op.kind == model::RangeKind::kUserAnnotation && closed.op.name.ends_with(kCompileWorkSuffix)) {
    if (closed.op.name == kCompileRange) ranged_compiles_.add(ns);
  } else {
    level.add(enclosed);
  }
  if (span.depth == 0) {  // nothing encloses these: outside every region
    outside_.add(level);
    pending_.erase(closed.tid);  // kept only for threads with ranges open: threads come and go
  }
}

void CompileSummarySink::python_span(uint32_t, const model::PythonSpan& span) {
  // span.name: "path(line): co_name"
  const size_t function_at = span.name.find("): ");
  if (function_at == std::string::npos) return;
  const std::string_view function = std::string_view(span.name).substr(function_at + 3);
  if (!function.starts_with(kResumePrefix)) return;
  const size_t line_at = function.rfind(kResumeLine);
  const size_t file_end = span.name.rfind('(', function_at);
  if (line_at == std::string_view::npos || line_at <= kResumePrefix.size() || file_end == std::string::npos) return;
  std::tuple<std::string, std::string, std::string> graph_break{
      span.name.substr(0, file_end), std::string(function.substr(kResumePrefix.size(), line_at - kResumePrefix.size())),
      std::string(function.substr(line_at + kResumeLine.size()))};
  if (graph_breaks_.size() < kMaxGraphBreaks) graph_breaks_.insert(std::move(graph_break));
}

bool CompileSummarySink::ByGraphId::operator()(const std::string& a, const std::string& b) const {
  // "<frame>/<recompile>: " as numbers; {max, max} for a text without the prefix (last).
  const auto graph_id = [](std::string_view reason) {
    const std::string_view id = reason.substr(0, reason.find(": "));
    const size_t slash = id.find('/');
    std::pair<uint64_t, uint64_t> graph;
    if (id.size() == reason.size() || slash == id.npos || !parse_number(id.substr(0, slash), &graph.first) ||
        !parse_number(id.substr(slash + 1), &graph.second))
      return std::pair<uint64_t, uint64_t>{UINT64_MAX, UINT64_MAX};
    return graph;
  };
  return std::pair(graph_id(a), std::string_view(a)) < std::pair(graph_id(b), std::string_view(b));
}

void CompileSummarySink::recompile_reason(const std::string& reason) {
  if (recompile_reasons_.size() < kMaxRecompileReasons) recompile_reasons_.insert(reason);
}

uint64_t CompileSummarySink::graph_calls() const {
  uint64_t calls = 0;
  for (const auto& [id, graph] : graphs_) calls += graph.calls;
  return calls;
}

std::vector<std::string> CompileSummarySink::describe(size_t limit) const {
  std::vector<std::string> lines;
  if (graphs_.empty()) return lines;
  std::map<uint64_t, std::vector<uint64_t>> recompiles;  // frame -> its recompile counts seen
  for (const auto& [id, graph] : graphs_) recompiles[id.first].push_back(id.second);
  const uint64_t total = total_ops();
  std::string first = "torch.compile: " + std::to_string(graphs_.size()) + " graphs (of " +
                      std::to_string(recompiles.size()) + " frames), " + std::to_string(graph_calls()) +
                      " graph calls; " + std::to_string(captured_.ops) + "/" + std::to_string(total) + " ops (" +
                      percent(captured_.ops, total) + ") and " + percent(captured_.ns, captured_.ns + outside_.ns) +
                      " of op time inside compiled regions";
  // The counter where it was seen (torch.profiler's traces have none), else 2.6's ranges.
  const Compiles& compiles = counted_compiles_.count > 0 ? counted_compiles_ : ranged_compiles_;
  if (compiles.count > 0)
    first += "; " + milliseconds(compiles.ns) + " compiling (" + std::to_string(compiles.count) + " compiles)";
  lines.push_back(first);
  if (kernel_calls_ > 0) {
    uint64_t region_ns = 0;
    for (const auto& [id, graph] : graphs_) region_ns += graph.ns;
    lines.push_back("  inductor C++ kernels: " + std::to_string(kernel_calls_) + " calls of " +
                    std::to_string(kernels_.size()) + " kernels, " + milliseconds(kernel_ns_) + " (" +
                    percent(kernel_ns_, region_ns) + " of the time in compiled regions)");
  }
  size_t shown = 0;
  for (const auto& [id, graph] : graphs_) {
    if (shown++ == limit) {
      lines.push_back("  ... " + std::to_string(graphs_.size() - limit) + " more graphs");
      break;
    }
    lines.push_back("  graph " + std::to_string(id.first) + "/" + std::to_string(id.second) + ": " +
                    std::to_string(graph.calls) + " calls, " + milliseconds(graph.ns) +
                    (graph.called_at.empty() ? "" : ", first called from " + graph.called_at));
  }
  for (const auto& [frame, counts] : recompiles) {
    if (counts.size() < 2) continue;
    const std::string& called_at = graphs_.at({frame, counts.front()}).called_at;
    lines.push_back("  recompiled: frame " + std::to_string(frame) + " has " + std::to_string(counts.size()) +
                    " graphs (" + std::to_string(counts.size() - 1) + " recompiles)" +
                    (called_at.empty() ? "" : ", first called from " + called_at));
  }
  if (!recompile_reasons_.empty()) lines.push_back("  recompiled because (the guard that failed, as dynamo words it):");
  shown = 0;
  for (const std::string& reason : recompile_reasons_) {
    if (shown++ == limit) {
      lines.push_back("    ... " + std::to_string(recompile_reasons_.size() - limit) + " more");
      break;
    }
    lines.push_back("    " + reason);
  }
  // Only where: python_function spans rebuilt from stacks may join two calls in a row, so
  // they do not count the resume function's calls.
  for (const auto& graph_break : graph_breaks_)
    lines.push_back("  graph break: in " + std::get<1>(graph_break) + " at " + std::get<0>(graph_break) + "(" +
                    std::get<2>(graph_break) + ")");
  std::map<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>> by_line;  // (op, line)
  for (const auto& [site, counts] : outside_.by_site) {
    const auto name = op_names_.find(site.first);
    auto& sum = by_line[{name == op_names_.end() ? "(other ops)" : name->second, user_line(site.second)}];
    sum.first += counts.first;
    sum.second += counts.second;
  }
  std::vector<std::pair<std::pair<std::string, std::string>, std::pair<uint64_t, uint64_t>>> sites(by_line.begin(),
                                                                                                    by_line.end());
  std::sort(sites.begin(), sites.end(), [](const auto& a, const auto& b) {
    return a.second.second != b.second.second ? a.second.second > b.second.second : a.first < b.first;
  });
  if (!sites.empty()) lines.push_back("  eager ops outside every compiled region (graph breaks worth fixing), by time:");
  for (size_t i = 0; i < std::min(limit, sites.size()); ++i)
    lines.push_back("    " + sites[i].first.first + " x" + std::to_string(sites[i].second.first) + ", " +
                    milliseconds(sites[i].second.second) +
                    (sites[i].first.second.empty() ? "" : ", at " + sites[i].first.second));
  return lines;
}

}  // namespace tprof
