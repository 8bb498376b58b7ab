// Which ops a session probes (--ops, --skip-ops, --no-view-ops). Each op costs the target a trap
// at its entry and one at each `ret` (docs/BENCHMARKS.md): an op left out has neither probed,
// so its calls cost nothing, and it has no range (an op is never given a guessed end). What it
// calls is still recorded, under the op around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/loader/probe_plan.h"
#include "userspace/loader/uprobe_multi.h"

namespace tprof {

class OpSelection {
 public:
  OpSelection() = default;
  // `only` and `skip` are ECMAScript regular expressions searched in the op's name
  // ("aten::addmm"); empty: not given. Throws tprof::Error with one line for a bad one.
  OpSelection(const std::string& only, const std::string& skip, bool skip_view_ops);

  bool selects_all() const { return !only_ && !skip_ && !skip_view_ops_; }
  bool probes(std::string_view op_name) const;
  // The options, as given: "--skip-ops 'aten::(add|mul)', --no-view-ops".
  std::string describe() const;

 private:
  std::optional<std::regex> only_, skip_;
  std::string only_text_, skip_text_;
  bool skip_view_ops_ = false;
};

// What a selection keeps of a library's op sites.
struct SelectedOps {
  UprobeSites sites;         // the probed ones
  std::vector<bool> probed;  // by op id
  size_t left_out = 0;
  // An op id past the plan's (a CUDA API call's) is probed.
  bool probes(uint64_t op_id) const { return op_id >= probed.size() || probed[op_id]; }
};
SelectedOps select_op_sites(const ProbePlan& plan, const OpSelection& selection);

// The sites whose cookie is an op id `selected` probes (an op's spilled-double reads).
UprobeSites sites_of_probed_ops(const UprobeSites& sites, const SelectedOps& selected);

// The ops of `selected` that `called` marks (by op id; symbolizer/aten/op_call_guards.h), with
// their sites: --max-overhead's windows probe only the ops the target has called so far.
SelectedOps called_ops(const SelectedOps& selected, const std::vector<bool>& called);

// The ops --no-view-ops leaves out: ones that return a view of their input or read its metadata,
// and move no data (torch's view ops, and aten::size and its kind).
bool is_view_op(std::string_view op_name);

}  // namespace tprof
