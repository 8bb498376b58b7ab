#include "userspace/session/attach_timings.h"

#include <cstdio>

namespace tprof {
namespace {

std::string milliseconds(uint64_t from_ns, uint64_t to_ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f ms", static_cast<double>(to_ns - from_ns) / 1e6);
  return text;
}

std::string source_text(const std::optional<PlanSource>& source) {
  if (source == PlanSource::kPlanCache) return " from cache";
  if (source == PlanSource::kSession) return " shared";
  return "";
}

}  // namespace

std::string AttachTimings::describe() const {
  return milliseconds(since_ns, linked_ns) + " (plan " + milliseconds(planning_ns, loading_ns) +
         source_text(library_plan) + ", load " + milliseconds(loading_ns, loaded_ns) + ", link " +
         milliseconds(linking_ns, linked_ns) + ")";
}

}  // namespace tprof
