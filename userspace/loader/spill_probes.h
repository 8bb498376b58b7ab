// The ops' second probe: where each op that takes doubles has saved them, in its frame or a
// register, a few instructions after its entry (symbolizer/binary/register_spills.h). A uprobe's pt_regs holds
// no xmm register, so the entry probe cannot read them; this one reads them from the frame
// (bpf/op_tracer.bpf.c op_spilled_arguments) for the entry record sent just before.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "symbolizer/aten/argument_plan.h"
#include "symbolizer/binary/section_map.h"
#include "userspace/loader/uprobe_multi.h"

namespace tprof {

struct SpillProbes {
  UprobeSites sites;             // one per op with a double read there; cookie = op id
  size_t doubles_planned = 0;    // arguments read at those sites
  std::vector<uint32_t> ops_with_unread_doubles;  // no saved place found for some: they stay unknown
};

// For op `op_id` at `function_addresses[op_id]`: plans (in `plans[op_id]`) the read of each
// double from its frame slot, and the probe that does it.
SpillProbes plan_spill_probes(const std::string& binary_path, const symbolizer::SectionMap& sections,
                              const std::vector<uint64_t>& function_addresses,
                              std::vector<symbolizer::OpArgumentPlan>& plans);

}  // namespace tprof
