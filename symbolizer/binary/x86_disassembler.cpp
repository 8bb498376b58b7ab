#include "symbolizer/binary/x86_disassembler.h"

#include <stdexcept>

namespace tprof::symbolizer {

std::optional<size_t> general_register_index(unsigned reg) {
  static const std::array<std::array<unsigned, 5>, kGeneralRegisterCount> kFamilies = {{
      {X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL, X86_REG_AH},
      {X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL, X86_REG_BH},
      {X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH},
      {X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH},
      {X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL, X86_REG_SIL},
      {X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL, X86_REG_DIL},
      {X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL, X86_REG_BPL},
      {X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL, X86_REG_SPL},
      {X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B, X86_REG_R8B},
      {X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B, X86_REG_R9B},
      {X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B, X86_REG_R10B},
      {X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B, X86_REG_R11B},
      {X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B, X86_REG_R12B},
      {X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B, X86_REG_R13B},
      {X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B, X86_REG_R14B},
      {X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B, X86_REG_R15B},
  }};
  for (size_t index = 0; index < kFamilies.size(); ++index) {
    for (unsigned member : kFamilies[index]) {
      if (member == reg) return index;
    }
  }
  return std::nullopt;
}

bool is_64_bit_register(const cs_x86_op& operand) {
  return operand.type == X86_OP_REG && operand.size == 8 &&
         general_register_index(operand.reg).has_value();
}

X86Disassembler::X86Disassembler() {
  if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle_) != CS_ERR_OK) {
    throw std::runtime_error("capstone cannot disassemble x86-64");
  }
  cs_option(handle_, CS_OPT_DETAIL, CS_OPT_ON);
  instruction_ = cs_malloc(handle_);
}

X86Disassembler::~X86Disassembler() {
  cs_free(instruction_, 1);
  cs_close(&handle_);
}

const cs_insn* X86Disassembler::decode(uint64_t address, std::string_view code) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(code.data());
  size_t size = code.size();
  if (!cs_disasm_iter(handle_, &bytes, &size, &address, instruction_)) return nullptr;
  return instruction_;
}

bool X86Disassembler::in_group(const cs_insn* instruction, unsigned group) const {
  return cs_insn_group(handle_, instruction, group);
}

std::vector<size_t> X86Disassembler::written_registers(const cs_insn* instruction) const {
  cs_regs read{}, written{};
  uint8_t read_count = 0, written_count = 0;
  std::vector<size_t> indexes;
  if (cs_regs_access(handle_, instruction, read, &read_count, written, &written_count) !=
      CS_ERR_OK) {
    for (size_t index = 0; index < kGeneralRegisterCount; ++index) indexes.push_back(index);
    return indexes;
  }
  for (uint8_t i = 0; i < written_count; ++i) {
    if (auto index = general_register_index(written[i])) indexes.push_back(*index);
  }
  return indexes;
}

std::vector<unsigned> X86Disassembler::written_vector_registers(const cs_insn* instruction) const {
  cs_regs read{}, written{};
  uint8_t read_count = 0, written_count = 0;
  std::vector<unsigned> numbers;
  if (cs_regs_access(handle_, instruction, read, &read_count, written, &written_count) != CS_ERR_OK) {
    for (unsigned number = 0; number < 32; ++number) numbers.push_back(number);
    return numbers;
  }
  for (uint8_t i = 0; i < written_count; ++i) {
    for (const unsigned first : {X86_REG_XMM0, X86_REG_YMM0, X86_REG_ZMM0})
      if (written[i] >= first && written[i] < first + 32) numbers.push_back(written[i] - first);
  }
  return numbers;
}

}  // namespace tprof::symbolizer
