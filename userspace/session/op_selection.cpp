#include "userspace/session/op_selection.h"

#include <algorithm>
#include <array>

#include "userspace/cli/error.h"

namespace tprof {
namespace {

// torch's view ops (the ones whose output aliases their input, tensor_view docs) that models
// call most, and the metadata queries that dispatch as ops. Sorted, for binary search.
constexpr std::array<std::string_view, 44> kViewOps = {
    "aten::_conj",         "aten::_reshape_alias", "aten::_unsafe_view", "aten::alias",
    "aten::as_strided",    "aten::as_strided_",    "aten::chunk",        "aten::detach",
    "aten::detach_",       "aten::diagonal",       "aten::dim",          "aten::expand",
    "aten::expand_as",     "aten::flatten",        "aten::imag",         "aten::is_complex",
    "aten::is_floating_point", "aten::lift_fresh", "aten::movedim",      "aten::narrow",
    "aten::numel",         "aten::permute",        "aten::real",         "aten::reshape",
    "aten::resolve_conj",  "aten::resolve_neg",    "aten::select",       "aten::size",
    "aten::slice",         "aten::split",          "aten::squeeze",      "aten::squeeze_",
    "aten::stride",        "aten::t",              "aten::t_",           "aten::transpose",
    "aten::transpose_",    "aten::unbind",         "aten::unflatten",    "aten::unsqueeze",
    "aten::unsqueeze_",    "aten::view",           "aten::view_as",      "aten::view_as_real",
};

std::regex compile(const std::string& pattern, const char* option) {
  try {
    return std::regex(pattern, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& error) {
    throw Error(std::string(option) + " '" + pattern + "' is not a regular expression: " + error.what());
  }
}

}  // namespace

bool is_view_op(std::string_view op_name) {
  static_assert(std::is_sorted(kViewOps.begin(), kViewOps.end()));
  return std::binary_search(kViewOps.begin(), kViewOps.end(), op_name);
}

OpSelection::OpSelection(const std::string& only, const std::string& skip, bool skip_view_ops)
    : only_text_(only), skip_text_(skip), skip_view_ops_(skip_view_ops) {
  if (!only.empty()) only_ = compile(only, "--ops");
  if (!skip.empty()) skip_ = compile(skip, "--skip-ops");
}

bool OpSelection::probes(std::string_view op_name) const {
  if (skip_view_ops_ && is_view_op(op_name)) return false;
  const std::string name(op_name);
  if (only_ && !std::regex_search(name, *only_)) return false;
  return !(skip_ && std::regex_search(name, *skip_));
}

SelectedOps select_op_sites(const ProbePlan& plan, const OpSelection& selection) {
  SelectedOps selected{.sites = {plan.sites.binary_path, {}, {}}, .probed = std::vector<bool>(plan.operators.size(), true)};
  for (size_t at = 0; at < plan.sites.offsets.size(); ++at) {
    const uint64_t op_id = plan.sites.cookies[at];
    if (!selection.probes(plan.operators.at(op_id).name)) {
      selected.probed[op_id] = false;
      ++selected.left_out;
      continue;
    }
    selected.sites.offsets.push_back(plan.sites.offsets[at]);
    selected.sites.cookies.push_back(op_id);
  }
  return selected;
}

UprobeSites sites_of_probed_ops(const UprobeSites& sites, const SelectedOps& selected) {
  UprobeSites kept{sites.binary_path, {}, {}};
  for (size_t at = 0; at < sites.offsets.size(); ++at) {
    if (!selected.probes(sites.cookies[at])) continue;
    kept.offsets.push_back(sites.offsets[at]);
    kept.cookies.push_back(sites.cookies[at]);
  }
  return kept;
}

SelectedOps called_ops(const SelectedOps& selected, const std::vector<bool>& called) {
  SelectedOps kept{.sites = {}, .probed = selected.probed, .left_out = 0};
  for (size_t op_id = 0; op_id < kept.probed.size(); ++op_id) {
    kept.probed[op_id] = kept.probed[op_id] && op_id < called.size() && called[op_id];
    if (!kept.probed[op_id]) ++kept.left_out;
  }
  kept.sites = sites_of_probed_ops(selected.sites, kept);
  return kept;
}

std::string OpSelection::describe() const {
  std::string text;
  auto add = [&](const std::string& part) { text += (text.empty() ? "" : ", ") + part; };
  if (only_) add("--ops '" + only_text_ + "'");
  if (skip_) add("--skip-ops '" + skip_text_ + "'");
  if (skip_view_ops_) add("--no-view-ops");
  return text;
}

}  // namespace tprof
