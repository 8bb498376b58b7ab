// A TorchLibraryPlan as the payload of a plan cache entry (plan_cache.h), and back: every field,
// in a fixed order, as plan_bytes.h encodes it. What a plan read back holds is what the plan
// written held, field for field; the paths of the files it probes are the reader's.
#pragma once

#include <string>
#include <string_view>

#include "userspace/session/torch_library_plan.h"

namespace tprof {

std::string serialize_plan(const TorchLibraryPlan& plan);

// The plan in `bytes`, its sites in the file at `host_path` (a target's view of it). Throws
// MalformedBytes (one line) when `bytes` are not exactly one plan whose parts agree (as many
// operators as sites, op ids in range, ...): such a plan is never used.
TorchLibraryPlan deserialize_plan(std::string_view bytes, const std::string& host_path);

}  // namespace tprof
