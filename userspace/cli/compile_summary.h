// The torch.compile summary at the end of a run: what dynamo's own profiler
// (torch/_dynamo/profiler.py, which must wrap the code in advance) reports, from the ranges
// dynamo's frame evaluator opens around every call of a compiled graph, "Torch-Compiled Region:
// <frame id>/<recompile count>" (symbolizer/dynamo/compiled_region_sites.h):
// - graphs (distinct frame/recompile pairs), the frames they come from, and graph calls;
// - the outermost ATen ops (no op encloses them) inside a compiled region and in all, by count
//   and by time: the seed's captured/total;
// and what it cannot give: inductor's C++ kernels (their calls and share of the regions' time),
// each frame's recompiles with the guard that failed (as dynamo words it), the graph breaks (from the Python frames of
// the functions dynamo resumes after them, which name the function and line), the eager ops
// outside every region with the Python line that called them, and the time spent compiling:
// in the wait counter torch 2.x starts around each compile ("pytorch.wait_counter.dynamo_compile",
// tprof's own range), or in torch 2.6's `_compile.compile_inner (dynamo_timed)` ranges in a trace
// of torch's profiler. The ops inside those, and inside 2.6's other `(dynamo_timed)` ranges, are
// compile work and count nowhere.
// By time, as dynamo's profiler counts: an op of eager code between two graphs of one frame
// (a graph break) runs inside that frame's region and counts as captured.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/trace_sink.h"

namespace tprof {

class CompileSummarySink final : public model::TraceSink {
 public:
  void begin(const model::SessionInfo&) override {}
  void thread(const model::ThreadInfo&) override {}
  void op(const model::ClosedOp& closed) override;
  // dynamo's resume functions, "torch_dynamo_resume_in_<function>_at_<line>": a graph break.
  void python_span(uint32_t tid, const model::PythonSpan& span) override;
  // Why dynamo compiled a frame again, as it words it ("0/0: tensor 'x' size mismatch ..."):
  // from a compile's wait counter here, or from a saved trace's "Recompile reason" args.
  void recompile_reason(const std::string& reason);
  void flow(const model::ForwardBackwardFlow&) override {}
  void finish(const model::RunSummary&) override {}

  uint64_t graph_calls() const;
  uint64_t captured_ops() const { return captured_.ops; }
  uint64_t total_ops() const { return captured_.ops + outside_.ops; }

  // Lines for the console, the first a one-line summary; none when no compiled graph ran.
  std::vector<std::string> describe(size_t limit = 5) const;

 private:
  // An op and the stack it was called from (stable for the recording: the stack store keeps
  // every stack it holds), named only when the summary is written: ops are many, sites few.
  using Site = std::pair<uint32_t, const model::PythonStack*>;  // (operator index, stack)
  // Outermost ATen ops not yet known to be inside a region, and where they were called.
  struct Ops {
    uint64_t ops = 0;
    uint64_t ns = 0;
    std::map<Site, std::pair<uint64_t, uint64_t>> by_site;  // -> ops, ns
    void add(const Site& site, uint64_t calls, uint64_t ns);
    void add(const Ops& other);
  };
  // The ops of ranges closed on a thread, by the depth they closed at, until the range
  // enclosing them closes: ranges close innermost first, so a range at depth d encloses exactly
  // what is pending deeper than d when it closes.
  Ops take_enclosed(std::vector<Ops>& pending, uint32_t depth);

  std::unordered_map<uint32_t, std::vector<Ops>> pending_;  // by thread
  std::unordered_map<uint32_t, std::string> op_names_;     // by operator index, as first seen
  struct Graph {
    uint64_t calls = 0;
    uint64_t ns = 0;
    std::string called_at;  // its first call's innermost Python frame outside torch: "file(line): function"
  };
  // By (frame id, recompile count): dynamo's cache limit (8 a frame by default) bounds them.
  std::map<std::pair<uint64_t, uint64_t>, Graph> graphs_;
  Ops captured_;
  Ops outside_;
  // (file, function, line) of each graph break.
  std::set<std::tuple<std::string, std::string, std::string>> graph_breaks_;
  // Dynamo's reasons start with the id of the graph whose guard failed ("0/10: ..."): in the
  // order of those ids, as numbers.
  struct ByGraphId {
    bool operator()(const std::string& a, const std::string& b) const;
  };
  std::set<std::string, ByGraphId> recompile_reasons_;  // distinct, at most kMaxRecompileReasons
  struct Compiles {
    uint64_t count = 0;
    uint64_t ns = 0;
    void add(uint64_t compile_ns) {
      ++count;
      ns += compile_ns;
    }
  };
  Compiles counted_compiles_;  // pytorch.wait_counter.dynamo_compile ranges
  Compiles ranged_compiles_;   // torch 2.6's `_compile.compile_inner (dynamo_timed)` ranges
  // Inductor's C++ kernels: their calls and time, and the distinct kernels (at most kMaxSites).
  uint64_t kernel_calls_ = 0;
  uint64_t kernel_ns_ = 0;
  std::set<std::string> kernels_;
};

// "Torch-Compiled Region: 0/1" -> {0, 1}; false for any other name.
bool parse_compiled_region(const std::string& name, std::pair<uint64_t, uint64_t>* graph);

}  // namespace tprof
