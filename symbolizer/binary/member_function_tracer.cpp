#include "symbolizer/binary/member_function_tracer.h"

#include <array>
#include <optional>

#include "symbolizer/binary/path_walk.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {

namespace {

using RegisterFile = std::array<TracedValue, kGeneralRegisterCount>;
using Kind = TracedValue::Kind;

// Accessors are a handful of instructions; the budgets only stop a runaway walk through code
// that is not an accessor at all (or a loop, which forks a path at every iteration).
constexpr int kInstructionBudget = 1024;
constexpr int kPathBudget = 32;

struct Path {
  uint64_t address = 0;
  RegisterFile registers{};
  std::vector<FieldTouch> compared_with_zero;
  std::vector<FieldTouch> set_to_zero;
};

// The offset into *this that a memory operand designates, if it is `this + displacement`.
std::optional<uint64_t> this_offset(const cs_x86_op& operand, const RegisterFile& registers) {
  if (operand.type != X86_OP_MEM) return std::nullopt;
  const x86_op_mem& memory = operand.mem;
  if (memory.index != X86_REG_INVALID || memory.segment != X86_REG_INVALID) return std::nullopt;
  const std::optional<size_t> base = general_register_index(memory.base);
  if (!base || registers[*base].kind != Kind::kThisAddress) return std::nullopt;
  return registers[*base].offset + static_cast<uint64_t>(memory.disp);
}

bool is_zero_immediate(const cs_x86_op& operand) {
  return operand.type == X86_OP_IMM && operand.imm == 0;
}

// Records a comparison of a field with zero: `cmp $0, field` in memory, or `test reg, reg` on
// a register holding a field.
void note_zero_comparison(const cs_insn& instruction, Path& path) {
  const cs_x86& x86 = instruction.detail->x86;
  if (x86.op_count != 2) return;
  const cs_x86_op& first = x86.operands[0];
  const cs_x86_op& second = x86.operands[1];
  if (instruction.id == X86_INS_CMP && is_zero_immediate(second)) {
    if (auto offset = this_offset(first, path.registers)) {
      path.compared_with_zero.push_back({*offset, first.size});
    }
  } else if (instruction.id == X86_INS_TEST && first.type == X86_OP_REG &&
             second.type == X86_OP_REG && first.reg == second.reg) {
    const std::optional<size_t> index = general_register_index(first.reg);
    if (!index) return;
    const TracedValue& value = path.registers[*index];
    if (value.kind == Kind::kThisField && first.size >= value.width) {
      path.compared_with_zero.push_back({value.offset, value.width});
    }
  }
}

// Applies an instruction whose effect on registers we understand; false for any other, whose
// written registers the caller must forget.
bool track(const cs_insn& instruction, Path& path) {
  const cs_x86& x86 = instruction.detail->x86;
  if (x86.op_count != 2 || x86.operands[0].type != X86_OP_REG) return false;
  const cs_x86_op& destination = x86.operands[0];
  const cs_x86_op& source = x86.operands[1];
  const std::optional<size_t> index = general_register_index(destination.reg);
  if (!index) return false;
  TracedValue& target = path.registers[*index];

  switch (instruction.id) {
    case X86_INS_MOV:
    case X86_INS_MOVZX: {
      // A write to a 32-bit register clears the upper half; narrower ones keep it.
      if (destination.size < 4) return false;
      if (auto offset = this_offset(source, path.registers)) {
        target = {Kind::kThisField, *offset, source.size};
      } else if (is_64_bit_register(source) && destination.size == 8) {
        target = path.registers[*general_register_index(source.reg)];
      } else {
        target = {};
      }
      return true;
    }
    case X86_INS_LEA:
      if (destination.size != 8) return false;
      if (auto offset = this_offset(source, path.registers)) {
        target = {Kind::kThisAddress, *offset, 0};
      } else {
        target = {};
      }
      return true;
    case X86_INS_ADD:
    case X86_INS_SUB:
      if (destination.size != 8 || source.type != X86_OP_IMM || target.kind != Kind::kThisAddress) {
        return false;
      }
      target.offset +=
          static_cast<uint64_t>(instruction.id == X86_INS_ADD ? source.imm : -source.imm);
      return true;
    default:
      return false;
  }
}

}  // namespace

std::vector<ReturningPath> MemberFunctionTracer::returning_paths(uint64_t function_address) const {
  std::vector<ReturningPath> returning;
  auto step = [&](const X86Disassembler& disassembler, const cs_insn& instruction, Path& path,
                  std::vector<Path>& forks) {
    const cs_x86& x86 = instruction.detail->x86;
    if (disassembler.in_group(&instruction, CS_GRP_RET)) {
      returning.push_back({path.registers[kRax], path.registers[kRdx],
                           std::move(path.compared_with_zero), std::move(path.set_to_zero)});
      return false;
    }
    if (disassembler.in_group(&instruction, CS_GRP_CALL)) return false;
    if (disassembler.in_group(&instruction, CS_GRP_JUMP)) {
      const bool direct = x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM;
      if (instruction.id == X86_INS_JMP) {
        if (!direct) return false;  // a tail call through a register or the GOT
        path.address = static_cast<uint64_t>(x86.operands[0].imm);
        return true;
      }
      if (direct) {
        Path taken = path;
        taken.address = static_cast<uint64_t>(x86.operands[0].imm);
        forks.push_back(std::move(taken));
      }
      return true;  // and on along the fall-through
    }

    if (instruction.id == X86_INS_MOV && x86.op_count == 2 && is_zero_immediate(x86.operands[1])) {
      if (auto offset = this_offset(x86.operands[0], path.registers)) {
        path.set_to_zero.push_back({*offset, x86.operands[0].size});
      }
    }
    note_zero_comparison(instruction, path);
    if (!track(instruction, path)) {
      for (size_t index : disassembler.written_registers(&instruction)) path.registers[index] = {};
    }
    return true;
  };

  Path entry;
  entry.address = function_address;
  entry.registers[kRdi] = {Kind::kThisAddress, 0, 0};
  walk_paths(sections_, std::move(entry), {.paths = kPathBudget, .instructions = kInstructionBudget},
             step);
  return returning;
}

}  // namespace tprof::symbolizer
