// Chooses the op sites to probe from the library's op catalog and gives each an op id: the
// attach cookie the BPF side stamps on its records, and the index of its model::Operator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model/trace_model.h"
#include "symbolizer/aten/op_catalog.h"
#include "userspace/loader/uprobe_multi.h"

namespace tprof {

struct ProbePlan {
  UprobeSites sites;                        // cookie i == index i of `operators`
  std::vector<uint64_t> addresses;          // link-time address of each site's function
  std::vector<model::Operator> operators;
  std::vector<size_t> catalog_entries;      // op id -> index into the catalog's entries
  // Ops whose code the linker folded onto an op already probed: their calls are recorded
  // under that op's name.
  size_t shared_address_skipped = 0;
};

ProbePlan plan_op_probes(const symbolizer::OpCatalog& catalog, const std::string& binary_path);

}  // namespace tprof
