// Where a library's code calls or jumps to given functions directly: `call rel32` and `jmp
// rel32` instructions found by scanning its executable sections.
#pragma once

#include <cstdint>
#include <vector>

#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

// Link-time addresses of `call rel32` instructions to any of `targets`, in the executable
// sections. Byte scanning also hits e8 bytes inside other instructions; callers keep only
// sites that disassembly of the enclosing function confirms.
std::vector<uint64_t> direct_calls_to(const SectionMap& sections, const std::vector<uint64_t>& targets);

// The same for `jmp rel32` (e9), the tail calls.
std::vector<uint64_t> direct_jumps_to(const SectionMap& sections, const std::vector<uint64_t>& targets);

}  // namespace tprof::symbolizer
