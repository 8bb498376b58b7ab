// Where an entry probe goes so that the kernel emulates the probed instruction
// (symbolizer/binary/emulated_probe_point.h), on functions of known code assembled into this
// test: a `push` at the entry, a test and its jump, a stack move before the first push, and a
// loop within the first instructions, as inductor's kernels have.
#include "symbolizer/binary/emulated_probe_point.h"

#include <gtest/gtest.h>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/section_map.h"
#include "symbolizer/binary/x86_disassembler.h"

// Never called: only their bytes are read, from this test's own file.
asm(R"(
  .text
  .p2align 4
  .globl tprof_probe_point_push_first
  .hidden tprof_probe_point_push_first
  .type tprof_probe_point_push_first, @function
tprof_probe_point_push_first:
  push %rbx
  mov %rdi, %rbx
  pop %rbx
  ret
  .size tprof_probe_point_push_first, .-tprof_probe_point_push_first

  .p2align 4
  .globl tprof_probe_point_test_then_jump
  .hidden tprof_probe_point_test_then_jump
  .type tprof_probe_point_test_then_jump, @function
tprof_probe_point_test_then_jump:
  test %rdx, %rdx
  jle 1f
  push %rbx
  pop %rbx
1:
  ret
  .size tprof_probe_point_test_then_jump, .-tprof_probe_point_test_then_jump

  .p2align 4
  .globl tprof_probe_point_moves_stack_first
  .hidden tprof_probe_point_moves_stack_first
  .type tprof_probe_point_moves_stack_first, @function
tprof_probe_point_moves_stack_first:
  sub $8, %rsp
  push %rbx
  pop %rbx
  add $8, %rsp
  ret
  .size tprof_probe_point_moves_stack_first, .-tprof_probe_point_moves_stack_first

  .p2align 4
  .globl tprof_probe_point_loops_at_once
  .hidden tprof_probe_point_loops_at_once
  .type tprof_probe_point_loops_at_once, @function
tprof_probe_point_loops_at_once:
  xor %eax, %eax
2:
  add $1, %rax
  cmp $64, %rax
  jne 2b
  ret
  .size tprof_probe_point_loops_at_once, .-tprof_probe_point_loops_at_once
)");

namespace tprof::symbolizer {
namespace {

class EmulatedProbePointTest : public ::testing::Test {
 protected:
  // The link-time address and end of one of the functions above.
  std::pair<uint64_t, uint64_t> function(std::string_view name) const {
    const DefinedSymbol* symbol = symbols_.find(name);
    if (symbol == nullptr) ADD_FAILURE() << name << " is not in the test's symbol table";
    return symbol ? std::pair{symbol->address, symbol->address + symbol->size} : std::pair<uint64_t, uint64_t>{};
  }
  uint64_t run_once(std::string_view name) const {
    const auto [start, end] = function(name);
    return emulated_entry_probe_address_run_once(sections_, start, end, {kRsp});
  }

  ElfFile elf_{"/proc/self/exe"};
  SectionMap sections_{elf_};
  DefinedSymbols symbols_{elf_};
};

TEST_F(EmulatedProbePointTest, APushAtTheEntryIsTheEntry) {
  const uint64_t start = function("tprof_probe_point_push_first").first;
  EXPECT_EQ(run_once("tprof_probe_point_push_first"), start);
}

TEST_F(EmulatedProbePointTest, ATestsJumpIsProbedInsteadOfTheTest) {
  const uint64_t start = function("tprof_probe_point_test_then_jump").first;
  EXPECT_EQ(run_once("tprof_probe_point_test_then_jump"), start + 3) << "test %rdx,%rdx is 3 bytes";
}

TEST_F(EmulatedProbePointTest, NothingPastAStackMoveWhenTheStackPointerIsKept) {
  const uint64_t start = function("tprof_probe_point_moves_stack_first").first;
  EXPECT_EQ(emulated_entry_probe_address(sections_, start, {}), start + 4) << "sub $8,%rsp is 4 bytes";
  EXPECT_EQ(run_once("tprof_probe_point_moves_stack_first"), start);
}

// The loop's back edge is the first conditional jump: a probe there would fire 64 times a call.
TEST_F(EmulatedProbePointTest, NoProbeInsideALoopOfTheFirstInstructions) {
  const uint64_t start = function("tprof_probe_point_loops_at_once").first;
  EXPECT_NE(emulated_entry_probe_address(sections_, start, {kRsp}), start) << "the case run_once is for";
  EXPECT_EQ(run_once("tprof_probe_point_loops_at_once"), start);
}

}  // namespace
}  // namespace tprof::symbolizer
