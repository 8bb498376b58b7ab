// What tprof works out from a libtorch_cpu file before probing it: the op sites and their
// operators (named C++ scopes included), how to read each op's arguments, where the ops' doubles
// are saved, where every probed function returns, and the record_function and autograd sites.
// It is the same for every process that maps the file, so a session works it out once per file
// (TorchLibraryPlans) and the ranks of a job after the first attach at once; the plan cache
// (plan_cache.h) keeps it for the next session.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "symbolizer/aten/argument_plan.h"
#include "userspace/cli/console.h"
#include "userspace/loader/exit_probes.h"
#include "userspace/loader/probe_plan.h"
#include "userspace/loader/range_probes.h"
#include "userspace/loader/spill_probes.h"
#include "userspace/session/target_process.h"

namespace tprof {

struct TorchLibraryPlan {
  ProbePlan plan;  // op sites and their operators, in the file it was read from
  // With shapes: how to read each op's arguments (by op id; named scopes have none) and its
  // doubles; empty when the op symbols spell no optional ABI tprof knows (`no_arguments_why`).
  std::vector<symbolizer::OpArgumentPlan> argument_plans;
  SpillProbes spills;
  std::string no_arguments_why;
  ReturnSites returns;  // of the ops (function i: op id i) and then of the autograd functions
  std::shared_ptr<const RangeSites> ranges;
  // What planning found to say (ops without schema, ops sharing code, doubles left unknown):
  // said on the console whenever the plan is made or read back from the cache.
  std::vector<std::string> notes;
};

// Reads `library` (one target's mapping of the file) and plans it.
TorchLibraryPlan plan_torch_library(const MappedLibrary& library, bool record_shapes);

// Where a target's plan came from: made now, read from the plan cache, or made for another
// target of this session.
enum class PlanSource { kPlanned, kPlanCache, kSession };

class PlanCache;

// The plans of a session, one per libtorch_cpu file (however each target reaches it: through
// its own root, in its own mount namespace).
class TorchLibraryPlans {
 public:
  // `cache`: where plans are kept from one session to the next; null: every session plans.
  explicit TorchLibraryPlans(std::unique_ptr<PlanCache> cache = nullptr);
  ~TorchLibraryPlans();
  TorchLibraryPlans(const TorchLibraryPlans&) = delete;
  TorchLibraryPlans& operator=(const TorchLibraryPlans&) = delete;

  struct Found {
    std::shared_ptr<const TorchLibraryPlan> plan;
    PlanSource source = PlanSource::kPlanned;
  };
  // The plan of the file `library` maps, worked out (or read from the cache) the first time it
  // is asked for; its notes and what the cache had to say go to `console`. Throws tprof::Error
  // when the file cannot be read.
  Found plan_for(const MappedLibrary& library, bool record_shapes, Console& console);

 private:
  using FileKey = std::tuple<dev_t, ino_t, int64_t, int64_t, bool>;  // device, inode, mtime, size, shapes
  std::unique_ptr<PlanCache> cache_;
  std::map<FileKey, std::shared_ptr<const TorchLibraryPlan>> plans_;
};

}  // namespace tprof
