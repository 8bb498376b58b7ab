// Python call stacks as userspace holds them once symbolized: what each frame is, and
// enough identity to tell one invocation of a function from the next.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symbolizer/python/bytecode_loops.h"

namespace tprof {

struct ResolvedFrame {
  uint64_t frame_address = 0;  // the invocation's frame: same address + code = same call
  uint64_t code_address = 0;
  std::string file;
  std::string function;        // co_name: what torch's profiler names a frame by
  std::string qualified_name;  // co_qualname (3.11+; co_name before): "Conv2d._conv_forward"
  uint32_t instruction = 0;  // the instruction executing now, in the walker's units
  // Where its code jumps backwards (owned by the code object cache); null when unknown.
  const std::vector<symbolizer::BackwardJump>* loops = nullptr;
  int line = 0;          // the line executing now (the call site of the next frame in)
  int first_line = 0;    // co_firstlineno: torch's python_function names use it
  // For nn.Module.__call__ frames: the module's class name and the module object.
  std::optional<std::string> module_class;
  uint64_t module_self = 0;
};

// Innermost frame first, as the walker records them.
using ResolvedStack = std::vector<ResolvedFrame>;

}  // namespace tprof
