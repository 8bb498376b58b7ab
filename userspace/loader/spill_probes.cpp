#include "userspace/loader/spill_probes.h"

#include "symbolizer/binary/register_spills.h"

namespace tprof {
namespace {

// The inputs BPF is told about that arrive in xmm registers: their indexes and registers.
struct XmmInputs {
  std::vector<size_t> inputs;
  std::vector<unsigned> registers;
};

XmmInputs xmm_inputs_of(const symbolizer::OpArgumentPlan& plan) {
  XmmInputs found;
  for (size_t i = 0; i < plan.inputs.size() && i < plan.bpf.argument_count; ++i) {
    if (!plan.inputs[i].xmm_register) continue;
    found.inputs.push_back(i);
    found.registers.push_back(*plan.inputs[i].xmm_register);
  }
  return found;
}

// Plans each found store's read; the number planned.
size_t plan_reads(symbolizer::OpArgumentPlan& plan, const XmmInputs& wanted, const symbolizer::RegisterSpills& spills) {
  size_t planned = 0;
  for (const symbolizer::SpilledRegister& spill : spills.spills) {
    for (size_t k = 0; k < wanted.registers.size(); ++k)
      if (wanted.registers[k] == spill.xmm && symbolizer::read_where_saved(plan, wanted.inputs[k], spill)) ++planned;
  }
  return planned;
}

}  // namespace

SpillProbes plan_spill_probes(const std::string& binary_path, const symbolizer::SectionMap& sections,
                              const std::vector<uint64_t>& function_addresses,
                              std::vector<symbolizer::OpArgumentPlan>& plans) {
  SpillProbes probes;
  probes.sites.binary_path = binary_path;
  for (uint32_t op_id = 0; op_id < plans.size() && op_id < function_addresses.size(); ++op_id) {
    const XmmInputs wanted = xmm_inputs_of(plans[op_id]);
    if (wanted.inputs.empty()) continue;
    const auto spills = symbolizer::find_register_spills(sections, function_addresses[op_id], wanted.registers);
    const auto offset = spills ? sections.file_offset_of(spills->probe_address) : std::nullopt;
    const size_t planned = offset ? plan_reads(plans[op_id], wanted, *spills) : 0;
    probes.doubles_planned += planned;
    if (planned < wanted.inputs.size()) probes.ops_with_unread_doubles.push_back(op_id);
    if (planned == 0) continue;
    probes.sites.offsets.push_back(*offset);
    probes.sites.cookies.push_back(op_id);
  }
  return probes;
}

}  // namespace tprof
