#include "symbolizer/autograd/sequence_counter.h"

#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

constexpr std::string_view kPeekSymbol = "_ZN2at15sequence_number4peekEv";
// peek() is a handful of instructions; anything longer is not the shape we know.
constexpr int kMaxInstructions = 8;

bool is_register(const cs_x86_op& operand, size_t general_register) {
  return operand.type == X86_OP_REG && is_64_bit_register(operand) &&
         general_register_index(operand.reg) == general_register;
}

}  // namespace

std::optional<SequenceCounterLocation> find_sequence_counter(const LibraryIndex& libtorch_cpu,
                                                             std::string* why_not) {
  const SectionMap& sections = libtorch_cpu.sections;
  const DefinedSymbols& symbols = libtorch_cpu.symbols;
  const DefinedSymbol* peek = symbols.find(kPeekSymbol);
  if (peek == nullptr) {
    *why_not = "no at::sequence_number::peek() in " + libtorch_cpu.elf.path();
    return std::nullopt;
  }
  X86Disassembler disassembler;
  uint64_t address = peek->address;
  std::string_view code = sections.bytes_at(address);
  std::optional<uint64_t> tls_index;
  bool called = false;
  for (int count = 0; count < kMaxInstructions && !code.empty(); ++count) {
    const cs_insn* instruction = disassembler.decode(address, code);
    if (instruction == nullptr) break;
    const cs_x86& x86 = instruction->detail->x86;
    if (instruction->id == X86_INS_LEA && x86.op_count == 2 && is_register(x86.operands[0], kRdi) &&
        x86.operands[1].mem.base == X86_REG_RIP) {
      tls_index = instruction->address + instruction->size + static_cast<uint64_t>(x86.operands[1].mem.disp);
    } else if (instruction->id == X86_INS_CALL) {
      called = tls_index.has_value();
    } else if (called && instruction->id == X86_INS_MOV && x86.op_count == 2 && is_register(x86.operands[0], kRax) &&
               x86.operands[1].type == X86_OP_MEM && general_register_index(x86.operands[1].mem.base) == kRax &&
               x86.operands[1].mem.index == X86_REG_INVALID) {
      return SequenceCounterLocation{*tls_index, static_cast<uint64_t>(x86.operands[1].mem.disp)};
    } else if (instruction->id == X86_INS_RET) {
      break;
    }
    address += instruction->size;
    code.remove_prefix(instruction->size);
  }
  *why_not = "at::sequence_number::peek() in " + libtorch_cpu.elf.path() +
             " is not the expected __tls_get_addr access";
  return std::nullopt;
}

}  // namespace tprof::symbolizer
