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

uint64_t emulated_entry_probe_address_run_once(const SectionMap& sections, uint64_t function_address,
                                               uint64_t function_end, std::initializer_list<size_t> kept_registers) {
  const uint64_t probed = emulated_entry_probe_address(sections, function_address, kept_registers);
  // Unknown bounds (a symbol without a size): no jump can be ruled out.
  if (probed == function_address || function_end <= probed) return function_address;
  X86Disassembler disassembler;
  std::string_view code = sections.bytes_at(function_address);
  if (code.size() < function_end - function_address) return function_address;
  code = code.substr(0, function_end - function_address);
  for (uint64_t address = function_address; !code.empty();) {
    const cs_insn* instruction = disassembler.decode(address, code);
    if (instruction == nullptr) return function_address;
    if (disassembler.in_group(instruction, CS_GRP_JUMP)) {
      const cs_x86& x86 = instruction->detail->x86;
      if (x86.op_count != 1 || x86.operands[0].type != X86_OP_IMM) return function_address;  // indirect
      const auto target = static_cast<uint64_t>(x86.operands[0].imm);
      if (target > function_address && target <= probed) return function_address;
    }
    address += instruction->size;
    code.remove_prefix(instruction->size);
  }
  return probed;
}

}  // namespace tprof::symbolizer
