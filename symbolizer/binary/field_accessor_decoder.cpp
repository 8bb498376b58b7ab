#include "symbolizer/binary/field_accessor_decoder.h"

#include <array>
#include <optional>
#include <set>
#include <vector>

#include "symbolizer/binary/hex_text.h"
#include "symbolizer/binary/path_walk.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {

namespace {

// What a register is known to hold, relative to the function's entry.
enum class Origin {
  kUnknown,
  kArgumentPointer,  // rdi at entry + offset
  kGlobalPointer,    // &global + offset
  kFileAddress,      // an address in the ELF (offset holds it) outside the global
  kArgumentField,    // the 8 bytes loaded from rdi at entry + offset
  kGlobalField,      // the 8 bytes loaded from &global + offset
};

struct SymbolicValue {
  Origin origin = Origin::kUnknown;
  uint64_t offset = 0;
};

using RegisterFile = std::array<SymbolicValue, kGeneralRegisterCount>;

// Accessors are a handful of instructions; the budget only stops a runaway walk through
// code that is not an accessor at all.
constexpr int kInstructionBudget = 256;
constexpr int kPathBudget = 16;

// What the file says about addresses: which lie inside the global, and what address the
// dynamic linker stores in each GOT slot.
struct AddressFacts {
  uint64_t global_address;
  uint64_t global_size;
  const Relocations& relocations;

  SymbolicValue classify(uint64_t address) const {
    if (address >= global_address && address - global_address < global_size) {
      return {Origin::kGlobalPointer, address - global_address};
    }
    return {Origin::kFileAddress, address};
  }

  // The address a memory operand designates, if it depends only on what we know.
  SymbolicValue effective_address(const cs_x86_op& operand, uint64_t next_address,
                                  const RegisterFile& registers) const {
    const x86_op_mem& memory = operand.mem;
    if (memory.index != X86_REG_INVALID || memory.segment != X86_REG_INVALID) return {};
    const uint64_t displacement = static_cast<uint64_t>(memory.disp);
    if (memory.base == X86_REG_RIP) return classify(next_address + displacement);
    std::optional<size_t> base = general_register_index(memory.base);
    if (!base) return {};
    const SymbolicValue& value = registers[*base];
    switch (value.origin) {
      case Origin::kArgumentPointer:
      case Origin::kGlobalPointer:
        return {value.origin, value.offset + displacement};
      case Origin::kFileAddress:
        return classify(value.offset + displacement);
      default:
        return {};
    }
  }

  // What an 8-byte load from `address` yields.
  SymbolicValue load_through(const SymbolicValue& address) const {
    switch (address.origin) {
      case Origin::kArgumentPointer:
        return {Origin::kArgumentField, address.offset};
      case Origin::kGlobalPointer:
        return {Origin::kGlobalField, address.offset};
      case Origin::kFileAddress:
        // Position-independent code reaches an exported global, or calls an exported
        // function, through a GOT slot, since another module could interpose the symbol;
        // assume none does.
        if (auto slot = relocations.pointer_at(address.offset); slot && slot->address) {
          return classify(*slot->address);
        }
        return {};
      default:
        return {};
    }
  }
};

// Applies a `mov` or `lea` into a full 64-bit register; false for any other instruction,
// whose effect the caller must approximate.
bool track_move(const cs_x86& x86, unsigned instruction_id, uint64_t next_address,
                const AddressFacts& facts, RegisterFile& registers) {
  if (instruction_id != X86_INS_MOV && instruction_id != X86_INS_LEA) return false;
  if (x86.op_count != 2 || !is_64_bit_register(x86.operands[0])) return false;
  const cs_x86_op& source = x86.operands[1];
  SymbolicValue value;
  if (instruction_id == X86_INS_LEA && source.type == X86_OP_MEM) {
    value = facts.effective_address(source, next_address, registers);
  } else if (source.type == X86_OP_MEM && source.size == 8) {
    value = facts.load_through(facts.effective_address(source, next_address, registers));
  } else if (is_64_bit_register(source)) {
    value = registers[*general_register_index(source.reg)];
  }
  registers[*general_register_index(x86.operands[0].reg)] = value;
  return true;
}

}  // namespace

FieldAccessorDecoder::FieldAccessorDecoder(const ElfFile& elf, uint64_t global_address,
                                           uint64_t global_size)
    : sections_(elf),
      relocations_(elf),
      global_address_(global_address),
      global_size_(global_size) {}

std::optional<uint64_t> FieldAccessorDecoder::global_field_returned_by(uint64_t function_address,
                                                                       std::string* why_not) const {
  return field_returned_by(function_address, /*of_global=*/true, why_not);
}

std::optional<uint64_t> FieldAccessorDecoder::argument_field_returned_by(
    uint64_t function_address, std::string* why_not) const {
  return field_returned_by(function_address, /*of_global=*/false, why_not);
}

std::optional<uint64_t> FieldAccessorDecoder::field_returned_by(uint64_t function_address,
                                                                bool of_global,
                                                                std::string* why_not) const {
  const Origin wanted = of_global ? Origin::kGlobalField : Origin::kArgumentField;
  const AddressFacts facts{global_address_, global_size_, relocations_};
  struct Path {
    uint64_t address;
    RegisterFile registers;
  };
  std::set<uint64_t> returned_offsets;
  auto step = [&](const X86Disassembler& disassembler, const cs_insn& instruction, Path& path,
                  std::vector<Path>& forks) {
    const cs_x86& x86 = instruction.detail->x86;
    const uint64_t next_address = path.address;
    if (disassembler.in_group(&instruction, CS_GRP_RET)) {
      const SymbolicValue& result = path.registers[kRax];
      if (result.origin == wanted) returned_offsets.insert(result.offset);
      return false;
    }
    if (disassembler.in_group(&instruction, CS_GRP_JUMP)) {
      std::optional<uint64_t> target;
      if (x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM) {
        target = static_cast<uint64_t>(x86.operands[0].imm);
      } else if (x86.op_count == 1 && x86.operands[0].type == X86_OP_MEM) {
        // A tail call through the PLT or a GOT slot (-fno-plt) to a function of this file.
        const SymbolicValue slot = facts.load_through(
            facts.effective_address(x86.operands[0], next_address, path.registers));
        if (slot.origin == Origin::kFileAddress) target = slot.offset;
      }
      if (target) forks.push_back({*target, path.registers});
      // Unconditional: the walk goes on there, as a fork; conditional: both ways.
      return instruction.id != X86_INS_JMP;
    }
    if (disassembler.in_group(&instruction, CS_GRP_CALL)) {
      for (size_t index : kCallerSavedRegisters) path.registers[index] = {};
    } else if (!track_move(x86, instruction.id, next_address, facts, path.registers)) {
      for (size_t index : disassembler.written_registers(&instruction)) path.registers[index] = {};
    }
    return true;
  };

  Path entry{function_address, {}};
  entry.registers[kRdi] = {Origin::kArgumentPointer, 0};
  walk_paths(sections_, entry, {.paths = kPathBudget, .instructions = kInstructionBudget}, step);

  auto fail = [&](const std::string& reason) -> std::optional<uint64_t> {
    if (why_not) *why_not = "function at " + hex(function_address) + ": " + reason;
    return std::nullopt;
  };
  if (returned_offsets.size() == 1) return *returned_offsets.begin();
  if (returned_offsets.empty()) {
    return fail(of_global ? "no path returns a field of the global object"
                          : "no path returns a field of the object its first argument points at");
  }
  std::string offsets;
  for (uint64_t offset : returned_offsets) offsets += (offsets.empty() ? "" : ", ") + hex(offset);
  return fail("paths return different fields (" + offsets + ")");
}

}  // namespace tprof::symbolizer
