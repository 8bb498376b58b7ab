// Where a function hands control back to its caller, found by disassembly: every `ret` the
// function can reach. tprof closes a range at its function's `ret` instead of with a
// uretprobe, because a uretprobe replaces the return address on the stack with a trampoline
// that has no unwind info, and a C++ exception thrown through that frame then aborts the
// target (std::terminate).
//
// A function's code is not always one block: GCC moves cold paths into separate fragments
// (`foo.cold`, each with an FDE of its own) and may end with a direct `jmp` to another function
// (a tail call), whose `ret` then returns to our caller. Both are followed. A `ret` found this
// way may also be reached by other functions (shared epilogues, a tail-called function's other
// callers): the BPF side matches a `ret` to its entry by stack pointer, never by address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "symbolizer/binary/function_bounds.h"
#include "symbolizer/binary/section_map.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {

struct FunctionExits {
  std::vector<uint64_t> returns;  // link-time addresses of the `ret` instructions, sorted
  // Code blocks (FDEs) read: the function's, cold ones, tail-called ones. A range whose `ret`
  // is not among `returns` (a longer chain, a tail call through a register) is closed later by
  // the BPF side's stack-pointer checks, flagged.
  size_t fragments = 0;
};

class FunctionExitFinder {
 public:
  // Both must outlive the finder.
  FunctionExitFinder(const SectionMap& sections, const FunctionBounds& bounds)
      : sections_(sections), bounds_(bounds) {}

  // The exits of the function whose first instruction is at `function_address`. Empty
  // `returns` when the address lies in no FDE or holds no code.
  FunctionExits exits_of(uint64_t function_address);

 private:
  const SectionMap& sections_;
  const FunctionBounds& bounds_;
  // One for all searches: opening capstone costs more than reading a small function.
  X86Disassembler disassembler_;
};

}  // namespace tprof::symbolizer
