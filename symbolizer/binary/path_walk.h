// Following a function's machine code path by path, the way the accessor decoders read it:
// from the entry, forking wherever the caller follows a branch both ways, under budgets that
// stop a runaway walk through code that is not what the caller expects (or a loop, which forks
// a path at every iteration).
#pragma once

#include <utility>
#include <vector>

#include "symbolizer/binary/section_map.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {

struct WalkBudget {
  int paths = 0;         // paths started, the entry's included
  int instructions = 0;  // decoded, over all paths together
};

// Walks from `entry`, one path at a time, the latest fork first. Path: any copyable type with
// a `uint64_t address` member, where the path decodes next. Before
// step(const X86Disassembler&, const cs_insn&, Path& path, std::vector<Path>& forks) sees an
// instruction, path.address has moved past it; `step` may point it elsewhere (a jump) and
// push paths to follow later onto `forks`, and returns whether this path goes on. A path also
// ends where its bytes do not decode: code we cannot read tells nothing.
template <typename Path, typename Step>
void walk_paths(const SectionMap& sections, Path entry, WalkBudget budget, Step step) {
  X86Disassembler disassembler;
  std::vector<Path> pending;
  pending.push_back(std::move(entry));
  int instructions_left = budget.instructions;
  for (int paths_started = 0; !pending.empty() && paths_started < budget.paths; ++paths_started) {
    Path path = std::move(pending.back());
    pending.pop_back();
    while (instructions_left-- > 0) {
      const cs_insn* instruction =
          disassembler.decode(path.address, sections.bytes_at(path.address));
      if (instruction == nullptr) break;
      path.address = instruction->address + instruction->size;
      if (!step(std::as_const(disassembler), *instruction, path, pending)) break;
    }
  }
}

}  // namespace tprof::symbolizer
