// Where a function stores the floating-point arguments it received in xmm registers, so that a
// probe can read them: a uprobe's pt_regs holds the general registers only, and a `double`
// parameter (batch_norm's momentum and eps, layer_norm's eps, dropout's p) arrives in xmm0-7.
//
// No xmm register survives a call under the SysV ABI, so a function that makes any call before
// it is done with such an argument saves it first, and GCC does so in the entry block: into its
// frame (at::_ops::batch_norm::call of torch 1.13: `movsd %xmm0,-0x110(%rbp)`) or into a
// callee-saved general register (torch 2.6's uniform_: `movq %xmm0,%r15`). Only that block is
// examined: there every instruction runs on every call, in order, so a probe on the block's
// closing branch or call (an instruction the kernel emulates) sees every store done, and finds
// the values where they were put.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

// Where the value is at the probe: a frame slot addressed from rbp or rsp as they are there, or
// a general register.
enum class SpillBase { kFramePointer, kStackPointer, kGeneralRegister };

struct SpilledRegister {
  unsigned xmm = 0;          // the argument's register: 0 for xmm0
  SpillBase base = SpillBase::kFramePointer;
  int32_t displacement = 0;  // of the slot from the base register's value at the probe
  unsigned general_register = 0;  // kGeneralRegister: x86_disassembler.h numbering (15: r15)
};

struct RegisterSpills {
  uint64_t probe_address = 0;  // link-time address of the entry block's closing jcc, jmp or call
  std::vector<SpilledRegister> spills;  // the requested registers stored intact, in request order
};

// Of the function at `function_address`, the entry-block stores of the requested xmm registers
// that still hold the function's arguments, and the probe site after them. nullopt when none of
// them is stored there, or the block does not close with a branch or call the kernel emulates.
std::optional<RegisterSpills> find_register_spills(const SectionMap& sections, uint64_t function_address,
                                                   std::span<const unsigned> xmm_registers);

}  // namespace tprof::symbolizer
