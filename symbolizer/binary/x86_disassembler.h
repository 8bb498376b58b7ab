// Capstone, set up for what the accessor decoders ask of x86-64 machine code: one instruction
// at a time, with operand details and the registers each instruction writes.
#pragma once

#include <capstone/capstone.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace tprof::symbolizer {

constexpr size_t kGeneralRegisterCount = 16;
// Indexes into a 16-entry register file, in the order general_register_index uses.
constexpr size_t kRax = 0;
constexpr size_t kRcx = 2;
constexpr size_t kRdx = 3;
constexpr size_t kRsi = 4;
constexpr size_t kRdi = 5;
constexpr size_t kRsp = 7;
// What the System V ABI lets a called function change: rax, rcx, rdx, rsi, rdi, r8-r11.
constexpr std::array<size_t, 9> kCallerSavedRegisters = {0, 2, 3, 4, 5, 8, 9, 10, 11};

// The 64-bit general register (0 rax, 1 rbx, 2 rcx, 3 rdx, 4 rsi, 5 rdi, 6 rbp, 7 rsp,
// 8..15 r8..r15) that `reg` is part of; writing any part of it changes the whole.
std::optional<size_t> general_register_index(unsigned reg);

// A register operand naming a full 64-bit general register.
bool is_64_bit_register(const cs_x86_op& operand);

class X86Disassembler {
 public:
  X86Disassembler();  // throws std::runtime_error if capstone cannot disassemble x86-64
  ~X86Disassembler();
  X86Disassembler(const X86Disassembler&) = delete;
  X86Disassembler& operator=(const X86Disassembler&) = delete;

  // The one instruction at `address` whose bytes start `code`; nullptr if they do not decode.
  // Valid until the next call.
  const cs_insn* decode(uint64_t address, std::string_view code);

  bool in_group(const cs_insn* instruction, unsigned group) const;

  // The general registers (indexes as above) the instruction writes; all of them when
  // capstone cannot tell.
  std::vector<size_t> written_registers(const cs_insn* instruction) const;

  // The vector registers (xmm, ymm or zmm number) the instruction writes; all 32 when capstone
  // cannot tell.
  std::vector<unsigned> written_vector_registers(const cs_insn* instruction) const;

 private:
  csh handle_ = 0;
  cs_insn* instruction_ = nullptr;
};

}  // namespace tprof::symbolizer
