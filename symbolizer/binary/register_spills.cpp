#include "symbolizer/binary/register_spills.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <set>

#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// Enough for an op's call function (300-600 instructions in torch 2.14) and the out-of-line
// paths it takes before its kernel call; what lies beyond counts as a way out.
constexpr size_t kInstructionsExamined = 2048;
constexpr size_t kRbp = 6;
constexpr size_t kRsp = 7;
constexpr unsigned kArgumentXmmRegisters = 8;  // xmm0-7 carry SysV's floating-point arguments
constexpr int kNoArgument = -1;
constexpr std::string_view kEndbr64 = "\xf3\x0f\x1e\xfa";

// The xmm/ymm/zmm register number `reg` is (or is part of); nullopt for any other register.
std::optional<unsigned> vector_register_number(unsigned reg) {
  for (const unsigned first : {X86_REG_XMM0, X86_REG_YMM0, X86_REG_ZMM0})
    if (reg >= first && reg < first + 32) return reg - first;
  return std::nullopt;
}

// Moves that copy an xmm register's low eightbyte whole, to or from memory or another register.
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
  bool operator==(const StoredSlot&) const = default;
};

// Which xmm and general registers, and which frame slots, certainly hold which argument at one
// point of the function, whichever way it came there. Every frame address is kept relative to
// the stack pointer at entry, so that stores through either base register can be compared.
class ArgumentLocations {
 public:
  explicit ArgumentLocations(std::span<const unsigned> xmm_registers) {
    xmm_holds_.fill(kNoArgument);
    general_holds_.fill(kNoArgument);
    for (const unsigned xmm : xmm_registers)
      if (xmm < kArgumentXmmRegisters) xmm_holds_[xmm] = static_cast<int>(xmm);
  }

  // After one instruction that does not leave the function. One the scan cannot follow (a rep
  // string op, a pop or any other unknown move of rsp) loses everything known.
  void step(const X86Disassembler& disassembler, const cs_insn* instruction) {
    if (lost()) return;
    const cs_x86& x86 = instruction->detail->x86;
    if (x86.prefix[0] != 0 && x86.prefix[0] != X86_PREFIX_LOCK) return lose();
    follow_memory_writes(instruction);
    if (disassembler.in_group(instruction, CS_GRP_CALL)) return forget_call_clobbered();
    const int moved = moved_argument(instruction);
    follow_register_writes(disassembler, instruction, moved);
    if (!follow_frame_registers(disassembler, instruction)) lose();
  }

  // Keeps what `other`, the state along another path here, knows too; true if that was less.
  bool meet(const ArgumentLocations& other) {
    const ArgumentLocations before = *this;
    if (stack_offset_ != other.stack_offset_ || frame_pointer_offset_ != other.frame_pointer_offset_) lose();
    for (unsigned i = 0; i < kArgumentXmmRegisters; ++i)
      if (xmm_holds_[i] != other.xmm_holds_[i]) xmm_holds_[i] = kNoArgument;
    for (size_t i = 0; i < kGeneralRegisterCount; ++i)
      if (general_holds_[i] != other.general_holds_[i]) general_holds_[i] = kNoArgument;
    std::erase_if(slots_, [&](const StoredSlot& slot) {
      return std::find(other.slots_.begin(), other.slots_.end(), slot) == other.slots_.end();
    });
    return *this != before;
  }

  // Where each requested argument is at a probe here: a slot if one holds it, else a register.
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

  bool operator==(const ArgumentLocations&) const = default;

 private:
  bool lost() const { return stack_offset_ == kStackUnknown; }

  void lose() {
    xmm_holds_.fill(kNoArgument);
    general_holds_.fill(kNoArgument);
    slots_.clear();
    stack_offset_ = kStackUnknown;
    frame_pointer_offset_.reset();
  }

  // A call keeps rsp (its push is undone by the callee's ret) and the callee-saved registers;
  // no xmm register survives it.
  void forget_call_clobbered() {
    xmm_holds_.fill(kNoArgument);
    for (const size_t reg : kCallerSavedRegisters) general_holds_[reg] = kNoArgument;
  }

  // The argument a move copies, from a register or a frame slot; a store of one into the frame
  // records its slot.
  int moved_argument(const cs_insn* instruction) {
    const cs_x86& x86 = instruction->detail->x86;
    const bool move = (is_vector_move(instruction->id) || instruction->id == X86_INS_MOV) && x86.op_count == 2;
    if (!move) return kNoArgument;
    if (x86.operands[1].type == X86_OP_MEM) return argument_stored_at(x86.operands[1].mem);
    if (x86.operands[1].type != X86_OP_REG) return kNoArgument;
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

  // The argument in the frame slot a load reads from (GCC 16 reloads one after each call).
  int argument_stored_at(const x86_op_mem& mem) const {
    const auto offset = frame_offset(mem);
    if (!offset) return kNoArgument;
    const auto slot =
        std::find_if(slots_.begin(), slots_.end(), [&](const StoredSlot& s) { return s.entry_offset == *offset; });
    return slot == slots_.end() ? kNoArgument : static_cast<int>(slot->xmm);
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
  // one). A write through any other register cannot reach them: they are spill slots, whose
  // address the code never takes.
  void follow_memory_writes(const cs_insn* instruction) {
    const cs_x86& x86 = instruction->detail->x86;
    if (instruction->id == X86_INS_PUSH || instruction->id == X86_INS_CALL) {
      forget_slots_overlapping(stack_offset_ - 8, 8);
      return;
    }
    for (uint8_t i = 0; i < x86.op_count; ++i) {
      const cs_x86_op& operand = x86.operands[i];
      if (operand.type != X86_OP_MEM || !(operand.access & CS_AC_WRITE)) continue;
      if (const auto offset = frame_offset(operand.mem))
        forget_slots_overlapping(*offset, operand.size > 0 ? operand.size : 8);  // 0: size unknown
    }
  }

  // Follows pushes and constant adjustments of rsp, and whether rbp is the frame pointer (set
  // by `mov %rsp,%rbp`) or a register like any other; false for any other write of rsp.
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

  static constexpr int64_t kStackUnknown = INT64_MIN;  // the state after lose(), which stays

  std::array<int, kArgumentXmmRegisters> xmm_holds_{};       // the argument each one holds
  std::array<int, kGeneralRegisterCount> general_holds_{};
  std::vector<StoredSlot> slots_;
  int64_t stack_offset_ = 0;                     // rsp now, from rsp at entry
  std::optional<int64_t> frame_pointer_offset_;  // rbp, while it is the frame pointer
};

// A jcc, jmp or call to a constant target, without prefixes: the branches x86 uprobes emulate
// instead of single-stepping (they refuse the 0x66 one of the `data16 data16 rex.W call
// __tls_get_addr` that torch's thread-local reads make).
bool is_emulated_branch(const X86Disassembler& disassembler, const cs_insn* instruction) {
  if (!disassembler.in_group(instruction, CS_GRP_JUMP) && !disassembler.in_group(instruction, CS_GRP_CALL))
    return false;
  const cs_x86& x86 = instruction->detail->x86;
  return instruction->bytes[0] == x86.opcode[0] && x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM;
}

// One instruction the walk over the function's control flow reached.
struct Reached {
  std::optional<ArgumentLocations> before;  // what holds the arguments as it starts
  std::vector<uint64_t> successors;
  bool leaves = false;       // returns, jumps through a register or to another function, or
                             // goes where the walk did not look
  bool probe_site = false;   // a branch the kernel emulates
  bool linked = false;       // successors, leaves and probe_site are set
};

// The function's control flow from its entry, with what holds the arguments at each
// instruction, found by meeting the states of every path there until none changes.
class FunctionWalk {
 public:
  FunctionWalk(const SectionMap& sections, uint64_t entry, std::span<const unsigned> xmm_registers)
      : sections_(sections), entry_(entry) {
    reached_[entry].before.emplace(xmm_registers);
    std::deque<uint64_t> pending = {entry};  // breadth first: the budget goes to what is near the entry
    while (!pending.empty()) {
      const uint64_t address = pending.front();
      pending.pop_front();
      visit(address, pending);
    }
  }

  const std::map<uint64_t, Reached>& reached() const { return reached_; }

  // Whether every run of the function that returns passes `site`: no way out is reachable
  // from the entry without it.
  bool on_every_path(uint64_t site) const {
    std::vector<uint64_t> pending = {entry_};
    std::set<uint64_t> seen = {site};
    while (!pending.empty()) {
      const uint64_t address = pending.back();
      pending.pop_back();
      if (!seen.insert(address).second) continue;
      const Reached& here = reached_.at(address);
      if (here.leaves) return false;
      pending.insert(pending.end(), here.successors.begin(), here.successors.end());
    }
    return true;
  }

 private:
  void visit(uint64_t address, std::deque<uint64_t>& pending) {
    const cs_insn* instruction = disassembler_.decode(address, sections_.bytes_at(address));
    Reached& here = reached_[address];
    if (instruction == nullptr) {
      here.leaves = true;
      return;
    }
    if (!here.linked) link(instruction, here);
    ArgumentLocations after = *here.before;
    after.step(disassembler_, instruction);
    for (const uint64_t next : here.successors) {
      auto [it, first] = reached_.try_emplace(next);
      if (first) {
        it->second.before = after;
      } else if (!it->second.before->meet(after)) {
        continue;
      }
      pending.push_back(next);
    }
  }

  // Where control goes after `instruction`. Under CET every function starts with endbr64, and
  // so does every landing pad: a jump to one is a tail call, and falling into one happens only
  // after a call that does not return.
  void link(const cs_insn* instruction, Reached& here) {
    here.linked = true;
    here.probe_site = is_emulated_branch(disassembler_, instruction);
    const uint64_t next = instruction->address + instruction->size;
    const cs_x86& x86 = instruction->detail->x86;
    const bool direct = x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM;
    const bool jump = disassembler_.in_group(instruction, CS_GRP_JUMP);
    if (disassembler_.in_group(instruction, CS_GRP_RET) || disassembler_.in_group(instruction, CS_GRP_IRET) ||
        (jump && !direct)) {
      here.leaves = true;
      return;
    }
    if (jump) add_successor(here, static_cast<uint64_t>(x86.operands[0].imm), /*jumped=*/true);
    const bool falls_through =
        instruction->id != X86_INS_JMP && instruction->id != X86_INS_UD2 && instruction->id != X86_INS_INT3;
    if (falls_through) add_successor(here, next, /*jumped=*/false);
  }

  void add_successor(Reached& here, uint64_t target, bool jumped) {
    const bool function_or_landing_pad = sections_.bytes_at(target).starts_with(kEndbr64);
    if (function_or_landing_pad) {
      here.leaves = here.leaves || jumped;
      return;
    }
    if (!reached_.contains(target) && reached_.size() >= kInstructionsExamined) {
      here.leaves = true;
      return;
    }
    here.successors.push_back(target);
  }

  const SectionMap& sections_;
  const uint64_t entry_;
  X86Disassembler disassembler_;
  std::map<uint64_t, Reached> reached_;
};

}  // namespace

std::optional<RegisterSpills> find_register_spills(const SectionMap& sections, uint64_t function_address,
                                                   std::span<const unsigned> xmm_registers) {
  const FunctionWalk walk(sections, function_address, xmm_registers);
  std::optional<RegisterSpills> best;
  for (const auto& [address, here] : walk.reached()) {
    if (!here.probe_site) continue;
    std::vector<SpilledRegister> spills = here.before->spills_at_probe(xmm_registers);
    if (spills.size() <= (best ? best->spills.size() : 0) || !walk.on_every_path(address)) continue;
    best = RegisterSpills{address, std::move(spills)};
    if (best->spills.size() == xmm_registers.size()) break;
  }
  return best;
}

}  // namespace tprof::symbolizer
