// Where a code object's bytecode jumps backwards: its loops. A frame slot is reused by the
// next call of the same function from the same call site (3.11+), so the Python timeline cannot
// tell two calls from one by the frame alone; but an invocation's instruction moves backwards
// only through a loop. If no loop of the code spans both instructions, a frame seen at an
// earlier instruction than before is a new call (docs/python-stacks.md).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "symbolizer/python/python_layout.h"

namespace tprof::symbolizer {

// A jump from the instruction at `from` back to `to` (to <= from), in the units frames record
// (bytes on 3.9, 2-byte code units on 3.10+).
struct BackwardJump {
  uint32_t from = 0;
  uint32_t to = 0;
};

// The backward jumps of `bytecode`: co_code on 3.9/3.10, co_code_adaptive (specialized
// instructions and their inline caches included) on 3.11-3.14. nullopt where it cannot be
// decoded with certainty: another version, instrumentation (a debugger's line events, 3.12+),
// a tier-2 executor (3.13+), or a jump that lands outside the code.
std::optional<std::vector<BackwardJump>> backward_jumps(const PythonVersion& version, std::span<const uint8_t> bytecode);

// Whether one invocation of code with these jumps can be at `earlier` (< `later`) after having
// been at `later`: some loop spans both, jumping back from at or after `later` to at or before
// `earlier`.
bool loop_spans(const std::vector<BackwardJump>& jumps, uint32_t earlier, uint32_t later);

}  // namespace tprof::symbolizer
