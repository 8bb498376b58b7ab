#include "userspace/loader/probe_plan.h"

#include <array>
#include <string_view>
#include <unordered_set>

#include "symbolizer/aten/argument_kinds.h"

namespace tprof {
namespace {

// c10::ObservedOperators::getUnobservedOperatorList (aten/src/ATen/core/dispatch/
// ObservedOperators.cpp): RecordFunction never fires for these, so torch.profiler does not
// show them. They are also among the most frequent calls, so skipping them saves traps.
constexpr std::array<std::string_view, 5> kUnobservedOps = {
    "aten::size", "aten::is_leaf", "aten::output_nr", "aten::_version", "aten::is_complex",
};

bool is_unobserved(const std::string& op_name) {
  for (std::string_view unobserved : kUnobservedOps)
    if (op_name == unobserved) return true;
  return false;
}

}  // namespace

ProbePlan plan_op_probes(const symbolizer::OpCatalog& catalog, const std::string& binary_path) {
  ProbePlan plan;
  plan.sites.binary_path = binary_path;
  std::unordered_set<uint64_t> probed_offsets;
  for (size_t index = 0; index < catalog.entries.size(); ++index) {
    const symbolizer::OpCatalogEntry& entry = catalog.entries[index];
    if (is_unobserved(entry.op_name)) continue;
    // Two probes on one address would double every record, and the kernel refuses a
    // second uprobe_multi site at the same offset of the same program.
    if (!probed_offsets.insert(entry.site.file_offset).second) {
      ++plan.shared_address_skipped;
      continue;
    }
    plan.sites.offsets.push_back(entry.site.file_offset);
    plan.sites.cookies.push_back(plan.operators.size());
    plan.addresses.push_back(entry.site.symbol_address);
    plan.operators.push_back(
        model::Operator{entry.op_name, entry.schema, model::RangeKind::kOperator, symbolizer::written_arguments(entry.schema), ""});
    plan.catalog_entries.push_back(index);
  }
  return plan;
}

}  // namespace tprof
