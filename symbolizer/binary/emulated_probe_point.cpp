#include "symbolizer/binary/emulated_probe_point.h"

#include <algorithm>

#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// A function's flag test comes first or not at all: look no further than its prologue.
constexpr int kInstructionsExamined = 4;
// A prologue that makes its frame and loads the stack protector first is seven instructions
// from endbr64 to its first test's jump.
constexpr int kInstructionsExaminedPastFrameSetup = 8;

bool writes_any(const X86Disassembler& disassembler, const cs_insn* instruction,
                std::initializer_list<size_t> registers) {
  const auto written = disassembler.written_registers(instruction);
  return std::any_of(registers.begin(), registers.end(), [&](size_t kept) {
    return std::find(written.begin(), written.end(), kept) != written.end();
  });
}

// The first conditional jump (or with `push_too` the first `push`) among the first
// `instructions_examined` instructions, when none before it writes `kept_registers`, jumps,
// calls or returns; else `function_address`. A `push` right at the entry (past endbr64, which
// uprobe_multi.h skips) is the entry itself.
uint64_t first_emulated_instruction(const SectionMap& sections, uint64_t function_address,
                                    std::initializer_list<size_t> kept_registers, int instructions_examined,
                                    bool push_too) {
  X86Disassembler disassembler;
  uint64_t address = function_address;
  uint64_t first_past_endbr64 = function_address;
  std::string_view code = sections.bytes_at(address);
  for (int count = 0; count < instructions_examined && !code.empty(); ++count) {
    const cs_insn* instruction = disassembler.decode(address, code);
    if (instruction == nullptr) break;
    if (instruction->id == X86_INS_ENDBR64 && address == function_address) first_past_endbr64 += instruction->size;
    if (push_too && instruction->id == X86_INS_PUSH) return address == first_past_endbr64 ? function_address : address;
    if (disassembler.in_group(instruction, CS_GRP_JUMP))
      return instruction->id == X86_INS_JMP ? function_address : address;  // jcc, else give up
    if (disassembler.in_group(instruction, CS_GRP_CALL) || disassembler.in_group(instruction, CS_GRP_RET))
      break;
    if (writes_any(disassembler, instruction, kept_registers)) break;
    address += instruction->size;
    code.remove_prefix(instruction->size);
  }
  return function_address;
}

}  // namespace

uint64_t conditional_jump_probe_address(const SectionMap& sections, uint64_t function_address,
                                        size_t kept_register) {
  return first_emulated_instruction(sections, function_address, {kept_register}, kInstructionsExamined,
                                    /*push_too=*/false);
}

uint64_t emulated_entry_probe_address(const SectionMap& sections, uint64_t function_address,
                                      std::initializer_list<size_t> kept_registers) {
  return first_emulated_instruction(sections, function_address, kept_registers, kInstructionsExaminedPastFrameSetup,
                                    /*push_too=*/true);
}

}  // namespace tprof::symbolizer
