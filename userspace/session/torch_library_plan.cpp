#include "userspace/session/torch_library_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "symbolizer/autograd/named_scopes.h"
#include "symbolizer/aten/op_catalog.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/library_index.h"
#include "userspace/cli/error.h"
#include "userspace/loader/exit_probes.h"
#include "userspace/session/plan_cache.h"

namespace tprof {
namespace {

// The C++ scopes torch's profiler shows besides ops (autograd's detach, ...): probed as ops,
// each a range named after its scope. Every torch has some, so finding none is said.
void add_named_scopes(TorchLibraryPlan& planned, const symbolizer::LibraryIndex& library) {
  ProbePlan& plan = planned.plan;
  const symbolizer::NamedScopes found = symbolizer::find_named_scopes(library);
  if (found.scopes.empty())
    planned.notes.push_back("warning: no named C++ scopes found (autograd's detach, ...): " + found.why_none +
                            "; torch's profiler shows them, this trace will not");
  for (const symbolizer::NamedScope& scope : found.scopes) {
    const auto offset = library.sections.file_offset_of(scope.function_address);
    const auto& probed = plan.addresses;
    if (!offset || std::find(probed.begin(), probed.end(), scope.function_address) != probed.end()) continue;
    plan.sites.offsets.push_back(*offset);
    plan.sites.cookies.push_back(plan.operators.size());
    plan.addresses.push_back(scope.function_address);
    plan.operators.push_back({scope.name, "", model::RangeKind::kOperator, {}, ""});
  }
}

// Ops whose float arguments stay unknown: tprof found no place their code saves them.
void note_unread_doubles(TorchLibraryPlan& planned) {
  const SpillProbes& spills = planned.spills;
  if (spills.ops_with_unread_doubles.empty()) return;
  std::set<std::string> names;
  for (const uint32_t op_id : spills.ops_with_unread_doubles) names.insert(planned.plan.operators.at(op_id).name);
  std::string listed;
  for (const std::string& name : names) listed += (listed.empty() ? "" : ", ") + name;
  planned.notes.push_back("float arguments of " + listed +
                          " are recorded as unknown: their code keeps them where tprof does not look");
}

// How to read each op's arguments, or none (and why) when the symbols spell no optional ABI.
void plan_arguments(TorchLibraryPlan& planned, const symbolizer::OpCatalog& catalog) {
  const auto optional_abi = symbolizer::optional_abi_of(catalog);
  if (!optional_abi) {
    planned.no_arguments_why = "the op symbols spell neither c10::optional nor std::optional";
    return;
  }
  planned.argument_plans.reserve(planned.plan.catalog_entries.size());
  for (const size_t entry_index : planned.plan.catalog_entries) {
    const symbolizer::OpCatalogEntry& entry = catalog.entries[entry_index];
    planned.argument_plans.push_back(
        symbolizer::plan_op_arguments(entry.schema, entry.site.mangled_symbol.c_str(), *optional_abi));
  }
}

}  // namespace

TorchLibraryPlan plan_torch_library(const MappedLibrary& library, bool record_shapes) {
  TorchLibraryPlan planned;
  const symbolizer::OpCatalog catalog = symbolizer::build_op_catalog(library.host_path);
  if (catalog.unresolved_count > 0)
    planned.notes.push_back(std::to_string(catalog.unresolved_count) +
                            " ops have no schema in the library; their names are derived from their symbols");
  planned.plan = plan_op_probes(catalog, library.host_path);
  if (planned.plan.shared_address_skipped > 0)
    planned.notes.push_back(std::to_string(planned.plan.shared_address_skipped) +
                            " ops share their code with another op and are recorded under its name");
  if (record_shapes) plan_arguments(planned, catalog);

  // Read once for every search of the library's code below, and closed with planning: the plan
  // keeps all that recording needs.
  const symbolizer::ElfFile elf(library.host_path);
  const symbolizer::LibraryIndex index(elf);
  auto ranges = std::make_shared<RangeSites>(find_range_sites(index));
  add_named_scopes(planned, index);
  // A function without a `ret` (one that always throws) is closed by the catch.
  std::vector<uint64_t> functions = planned.plan.addresses;
  const std::vector<uint64_t> autograd = ranges->range_function_addresses();
  functions.insert(functions.end(), autograd.begin(), autograd.end());
  planned.returns = plan_return_sites(index, functions);
  if (!planned.argument_plans.empty()) {
    planned.spills =
        plan_spill_probes(library.host_path, index.sections, planned.plan.addresses, planned.argument_plans);
    note_unread_doubles(planned);
  }
  planned.ranges = std::move(ranges);
  return planned;
}

TorchLibraryPlans::TorchLibraryPlans(std::unique_ptr<PlanCache> cache) : cache_(std::move(cache)) {}

TorchLibraryPlans::~TorchLibraryPlans() = default;

TorchLibraryPlans::Found TorchLibraryPlans::plan_for(const MappedLibrary& library, bool record_shapes,
                                                     Console& console) {
  struct stat file{};
  if (::stat(library.host_path.c_str(), &file) != 0)
    throw Error(errno_message("cannot read " + library.host_path, errno));
  const FileKey key{file.st_dev, file.st_ino, file.st_mtim.tv_sec * 1'000'000'000LL + file.st_mtim.tv_nsec,
                    file.st_size, record_shapes};
  auto& planned = plans_[key];
  if (planned) return {planned, PlanSource::kSession};
  const auto make = [&] { return plan_torch_library(library, record_shapes); };
  Found found{nullptr, PlanSource::kPlanned};
  if (cache_) {
    PlanCache::Result result =
        cache_->plan(library.host_path, record_shapes, make, [&](const std::string& line) { console.line(line); });
    found = {std::make_shared<const TorchLibraryPlan>(std::move(result.plan)),
             result.from_cache ? PlanSource::kPlanCache : PlanSource::kPlanned};
  } else {
    found.plan = std::make_shared<const TorchLibraryPlan>(make());
  }
  for (const std::string& note : found.plan->notes) console.line(note);
  planned = found.plan;
  return found;
}

}  // namespace tprof
