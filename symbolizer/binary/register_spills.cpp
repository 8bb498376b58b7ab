#include "symbolizer/binary/register_spills.h"

#include <algorithm>
#include <array>

#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// An entry block that saves its arguments is a prologue and a few dozen moves.
constexpr int kInstructionsExamined = 128;
constexpr size_t kRbp = 6;
constexpr size_t kRsp = 7;
constexpr unsigned kArgumentXmmRegisters = 8;  // xmm0-7 carry SysV's floating-point arguments
constexpr int kNoArgument = -1;

// The xmm/ymm/zmm register number `reg` is (or is part of); nullopt for any other register.
std::optional<unsigned> vector_register_number(unsigned reg) {
  for (const unsigned first : {X86_REG_XMM0, X86_REG_YMM0, X86_REG_ZMM0})
    if (reg >= first && reg < first + 32) return reg - first;
  return std::nullopt;
}

// Moves that copy an xmm register's low eightbyte whole, to memory or to another register.
bool is_vector_move(unsigned id) {
  static constexpr std::array kMoves = {X86_INS_MOVSD,  X86_INS_MOVQ,   X86_INS_MOVAPD, X86_INS_MOVAPS,
                                        X86_INS_MOVUPD, X86_INS_MOVUPS, X86_INS_MOVDQA, X86_INS_MOVDQU,
                                        X86_INS_MOVLPD, X86_INS_VMOVSD, X86_INS_VMOVQ,  X86_INS_VMOVAPD,
                                        X86_INS_VMOVAPS, X86_INS_VMOVUPD, X86_INS_VMOVUPS};
  return std::find(kMoves.begin(), kMoves.end(), id) != kMoves.end();
}

// A saved eightbyte, at an offset from the stack pointer's value at the function's entry.
struct StoredSlot {
  unsigned xmm;
  SpillBase base;
  int64_t entry_offset;
};

// Follows the entry block one instruction at a time: which xmm and general registers hold
// which argument, and which frame slots. Every frame address is kept relative to the stack
// pointer at entry, so that stores through either base register can be compared.
class EntryBlockScan {
 public:
  explicit EntryBlockScan(std::span<const unsigned> xmm_registers) {
    xmm_holds_.fill(kNoArgument);
    general_holds_.fill(kNoArgument);
    for (const unsigned xmm : xmm_registers)
      if (xmm < kArgumentXmmRegisters) xmm_holds_[xmm] = static_cast<int>(xmm);
  }

  // Takes one instruction of the block that is not its end; false when it does something the
  // scan cannot follow (then nothing saved can be trusted).
  bool step(const X86Disassembler& disassembler, const cs_insn* instruction) {
    const cs_x86& x86 = instruction->detail->x86;
    if (x86.prefix[0] != 0 && x86.prefix[0] != X86_PREFIX_LOCK) return false;  // rep string ops
    if (!follow_memory_writes(instruction)) return false;
    const int moved = moved_argument(instruction);
    follow_register_writes(disassembler, instruction, moved);
    return follow_frame_registers(disassembler, instruction);
  }

  // Where each requested argument is at the probe: a slot if one holds it, else a register.
  std::vector<SpilledRegister> spills_at_probe(std::span<const unsigned> xmm_registers) const {
    std::vector<SpilledRegister> spills;
    for (const unsigned xmm : xmm_registers) {
      const auto slot = std::find_if(slots_.begin(), slots_.end(), [&](const StoredSlot& s) { return s.xmm == xmm; });
      if (slot != slots_.end()) {
        const int64_t base_offset = slot->base == SpillBase::kFramePointer ? *frame_pointer_offset_ : stack_offset_;
        spills.push_back({xmm, slot->base, static_cast<int32_t>(slot->entry_offset - base_offset), 0});
        continue;
      }
      const auto held = std::find(general_holds_.begin(), general_holds_.end(), static_cast<int>(xmm));
      if (held != general_holds_.end())
        spills.push_back({xmm, SpillBase::kGeneralRegister, 0, static_cast<unsigned>(held - general_holds_.begin())});
    }
    return spills;
  }

 private:
  // The argument a register-to-register or register-to-memory move copies; a store of one
  // into the frame records its slot.
  int moved_argument(const cs_insn* instruction) {
    const cs_x86& x86 = instruction->detail->x86;
    const bool move = (is_vector_move(instruction->id) || instruction->id == X86_INS_MOV) && x86.op_count == 2 &&
                      x86.operands[1].type == X86_OP_REG;
    if (!move) return kNoArgument;
    const int carried = argument_in(x86.operands[1]);
    if (carried != kNoArgument && x86.operands[0].type == X86_OP_MEM) {
      if (const auto offset = frame_offset(x86.operands[0].mem))
        slots_.push_back({static_cast<unsigned>(carried), base_of(x86.operands[0].mem), *offset});
    }
    return carried;
  }

  // The argument a whole 64-bit register operand holds.
  int argument_in(const cs_x86_op& operand) const {
    if (const auto xmm = vector_register_number(operand.reg); xmm && *xmm < kArgumentXmmRegisters)
      return xmm_holds_[*xmm];
    if (is_64_bit_register(operand)) return general_holds_[*general_register_index(operand.reg)];
    return kNoArgument;
  }

  // Any register written loses what it held, but the destination of a move of an argument.
  void follow_register_writes(const X86Disassembler& disassembler, const cs_insn* instruction, int moved) {
    for (const unsigned reg : disassembler.written_vector_registers(instruction))
      if (reg < kArgumentXmmRegisters) xmm_holds_[reg] = kNoArgument;
    for (const size_t reg : disassembler.written_registers(instruction)) general_holds_[reg] = kNoArgument;
    const cs_x86& x86 = instruction->detail->x86;
    if (moved == kNoArgument || x86.operands[0].type != X86_OP_REG) return;
    if (const auto xmm = vector_register_number(x86.operands[0].reg); xmm && *xmm < kArgumentXmmRegisters)
      xmm_holds_[*xmm] = moved;
    else if (is_64_bit_register(x86.operands[0]))
      general_holds_[*general_register_index(x86.operands[0].reg)] = moved;
  }

  // A write into the frame ends the slots it overlaps (a store of an argument then makes a new
  // one); a write through any other base register might reach the frame too, unseen, so the
  // scan gives up.
  bool follow_memory_writes(const cs_insn* instruction) {
    const cs_x86& x86 = instruction->detail->x86;
    if (instruction->id == X86_INS_PUSH) {
      forget_slots_overlapping(stack_offset_ - 8, 8);
      return true;
    }
    for (uint8_t i = 0; i < x86.op_count; ++i) {
      const cs_x86_op& operand = x86.operands[i];
      if (operand.type != X86_OP_MEM || !(operand.access & CS_AC_WRITE)) continue;
      if (operand.mem.base == X86_REG_RIP) continue;  // static data, never the frame
      const auto offset = frame_offset(operand.mem);
      if (!offset) return false;
      forget_slots_overlapping(*offset, operand.size > 0 ? operand.size : 8);  // 0: size unknown
    }
    return true;
  }

  // Follows pushes and constant adjustments of rsp, and whether rbp is the frame pointer (set
  // by `mov %rsp,%rbp`) or a register like any other; any other write of rsp ends the scan.
  bool follow_frame_registers(const X86Disassembler& disassembler, const cs_insn* instruction) {
    const std::vector<size_t> written = disassembler.written_registers(instruction);
    const bool writes_rsp = std::find(written.begin(), written.end(), kRsp) != written.end();
    const bool writes_rbp = std::find(written.begin(), written.end(), kRbp) != written.end();
    const cs_x86& x86 = instruction->detail->x86;
    if (writes_rbp) {
      std::erase_if(slots_, [](const StoredSlot& slot) { return slot.base == SpillBase::kFramePointer; });
      const bool frame_setup = instruction->id == X86_INS_MOV && x86.op_count == 2 && x86.operands[0].type == X86_OP_REG &&
                               x86.operands[0].reg == X86_REG_RBP && x86.operands[1].type == X86_OP_REG &&
                               x86.operands[1].reg == X86_REG_RSP;
      frame_pointer_offset_ = frame_setup ? std::optional<int64_t>(stack_offset_) : std::nullopt;
    }
    if (!writes_rsp) return true;
    if (instruction->id == X86_INS_PUSH) {
      stack_offset_ -= 8;
      return true;
    }
    const bool constant_adjustment = (instruction->id == X86_INS_SUB || instruction->id == X86_INS_ADD) &&
                                     x86.op_count == 2 && x86.operands[0].type == X86_OP_REG &&
                                     x86.operands[0].reg == X86_REG_RSP && x86.operands[1].type == X86_OP_IMM;
    if (!constant_adjustment) return false;  // pop too: it would free slots below it
    stack_offset_ += instruction->id == X86_INS_SUB ? -x86.operands[1].imm : x86.operands[1].imm;
    return true;
  }

  static SpillBase base_of(const x86_op_mem& mem) {
    return mem.base == X86_REG_RBP ? SpillBase::kFramePointer : SpillBase::kStackPointer;
  }

  // The address as an offset from the entry stack pointer; nullopt unless it is rsp, or rbp as
  // the frame pointer, plus a constant.
  std::optional<int64_t> frame_offset(const x86_op_mem& mem) const {
    if (mem.index != X86_REG_INVALID || mem.segment != X86_REG_INVALID) return std::nullopt;
    if (mem.base == X86_REG_RSP) return stack_offset_ + mem.disp;
    if (mem.base == X86_REG_RBP && frame_pointer_offset_) return *frame_pointer_offset_ + mem.disp;
    return std::nullopt;
  }

  void forget_slots_overlapping(int64_t offset, int64_t size) {
    std::erase_if(slots_, [&](const StoredSlot& slot) {
      return slot.entry_offset < offset + size && offset < slot.entry_offset + 8;
    });
  }

  std::array<int, kArgumentXmmRegisters> xmm_holds_{};       // the argument each one holds
  std::array<int, kGeneralRegisterCount> general_holds_{};
  std::vector<StoredSlot> slots_;
  int64_t stack_offset_ = 0;                     // rsp now, from rsp at entry
  std::optional<int64_t> frame_pointer_offset_;  // rbp, while it is the frame pointer
};

// A jcc, jmp or call to a constant target: the branches x86 uprobes emulate instead of
// single-stepping.
bool is_emulated_branch(const X86Disassembler& disassembler, const cs_insn* instruction) {
  if (!disassembler.in_group(instruction, CS_GRP_JUMP) && !disassembler.in_group(instruction, CS_GRP_CALL))
    return false;
  const cs_x86& x86 = instruction->detail->x86;
  return x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM;
}

bool ends_block(const X86Disassembler& disassembler, const cs_insn* instruction) {
  for (const unsigned group : {CS_GRP_JUMP, CS_GRP_CALL, CS_GRP_RET, CS_GRP_INT, CS_GRP_IRET})
    if (disassembler.in_group(instruction, group)) return true;
  return false;
}

}  // namespace

std::optional<RegisterSpills> find_register_spills(const SectionMap& sections, uint64_t function_address,
                                                   std::span<const unsigned> xmm_registers) {
  X86Disassembler disassembler;
  EntryBlockScan scan(xmm_registers);
  uint64_t address = function_address;
  std::string_view code = sections.bytes_at(address);
  for (int count = 0; count < kInstructionsExamined && !code.empty(); ++count) {
    const cs_insn* instruction = disassembler.decode(address, code);
    if (instruction == nullptr) return std::nullopt;
    if (ends_block(disassembler, instruction)) {
      if (!is_emulated_branch(disassembler, instruction)) return std::nullopt;
      RegisterSpills found{address, scan.spills_at_probe(xmm_registers)};
      if (found.spills.empty()) return std::nullopt;
      return found;
    }
    if (!scan.step(disassembler, instruction)) return std::nullopt;
    address += instruction->size;
    code.remove_prefix(instruction->size);
  }
  return std::nullopt;
}

}  // namespace tprof::symbolizer
