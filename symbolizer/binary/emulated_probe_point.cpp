#include "symbolizer/binary/emulated_probe_point.h"

#include <algorithm>

#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// A function's flag test comes first or not at all: look no further than its prologue.
constexpr int kInstructionsExamined = 4;

}  // namespace

uint64_t conditional_jump_probe_address(const SectionMap& sections, uint64_t function_address,
                                        size_t kept_register) {
  X86Disassembler disassembler;
  uint64_t address = function_address;
  std::string_view code = sections.bytes_at(address);
  for (int count = 0; count < kInstructionsExamined && !code.empty(); ++count) {
    const cs_insn* instruction = disassembler.decode(address, code);
    if (instruction == nullptr) break;
    if (disassembler.in_group(instruction, CS_GRP_JUMP))
      return instruction->id == X86_INS_JMP ? function_address : address;  // jcc, else give up
    if (disassembler.in_group(instruction, CS_GRP_CALL) || disassembler.in_group(instruction, CS_GRP_RET))
      break;
    const auto written = disassembler.written_registers(instruction);
    if (std::find(written.begin(), written.end(), kept_register) != written.end()) break;
    address += instruction->size;
    code.remove_prefix(instruction->size);
  }
  return function_address;
}

}  // namespace tprof::symbolizer
