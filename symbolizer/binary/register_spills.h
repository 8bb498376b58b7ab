// Where a function stores the floating-point arguments it received in xmm registers, so that a
// probe can read them: a uprobe's pt_regs holds the general registers only, and a `double`
// parameter (batch_norm's momentum and eps, layer_norm's eps, dropout's p) arrives in xmm0-7.
//
// No xmm register survives a call under the SysV ABI, so a function that makes any call before
// it is done with such an argument saves it first. GCC 12 and 14 do so in the entry block: into
// the frame (at::_ops::batch_norm::call of torch 1.13: `movsd %xmm0,-0x110(%rbp)`) or into a
// callee-saved general register (torch 2.6's uniform_: `movq %xmm0,%r15`). GCC 16 (torch 2.14)
// stores the first one there and the others only around each call, on each path: batch_norm's
// eps stays in xmm1 past the entry block, is stored and reloaded around the __cxa_guard_acquire
// of the cold path that sets up the op's handle, and stored again (`movsd %xmm1,-0x110(%rbp)`)
// before the __tls_get_addr every run makes. So the function's control flow is followed from
// its entry, with where each argument certainly is at each instruction, whichever way led
// there; the probe goes on the first branch or call the kernel emulates that every run which
// returns passes, among those where the most arguments are readable.
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
  uint64_t probe_address = 0;  // link-time address of a jcc, jmp or call every run passes
  std::vector<SpilledRegister> spills;  // the requested registers stored intact, in request order
};

// Of the function at `function_address`, where the arguments that arrived in the requested xmm
// registers are at a probe site every run of it passes. nullopt when no such site has any of
// them in a slot or general register.
std::optional<RegisterSpills> find_register_spills(const SectionMap& sections, uint64_t function_address,
                                                   std::span<const unsigned> xmm_registers);

}  // namespace tprof::symbolizer
