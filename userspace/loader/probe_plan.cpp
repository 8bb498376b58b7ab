#include "userspace/loader/probe_plan.h"

#include <unordered_set>

#include "symbolizer/aten/argument_kinds.h"
#include "symbolizer/aten/observed_ops.h"

namespace tprof {

ProbePlan plan_op_probes(const symbolizer::OpCatalog& catalog, const std::string& binary_path) {
  ProbePlan plan;
  plan.sites.binary_path = binary_path;
  std::unordered_set<uint64_t> probed_offsets;
  for (size_t index = 0; index < catalog.entries.size(); ++index) {
    const symbolizer::OpCatalogEntry& entry = catalog.entries[index];
    if (symbolizer::is_unobserved_op(entry.op_name)) continue;  // also saves traps: they are frequent
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
