#include "symbolizer/autograd/node_field_offsets.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "symbolizer/binary/hex_text.h"
#include "symbolizer/binary/plt_stubs.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// AccumulateGrad::AccumulateGrad(at::Tensor) under its C1 and C2 names (see find_first).
constexpr std::array<std::string_view, 2> kAccumulateGradConstructors = {
    "_ZN5torch8autograd14AccumulateGradC1EN2at6TensorE",
    "_ZN5torch8autograd14AccumulateGradC2EN2at6TensorE",
};
constexpr std::string_view kCurrentThreadId = "_ZN2at14RecordFunction15currentThreadIdEv";

// The constructor runs a few dozen instructions before currentThreadId(); the budget only
// stops a walk through code that is not the expected constructor.
constexpr int kInstructionBudget = 512;
constexpr uint64_t kAllOnes = ~uint64_t{0};

bool is_xmm(const cs_x86_op& operand) {
  return operand.type == X86_OP_REG && operand.reg >= X86_REG_XMM0 && operand.reg <= X86_REG_XMM31;
}

// The 16-byte register moves compilers use to load a vector constant.
bool is_vector_move(unsigned instruction_id) {
  switch (instruction_id) {
    case X86_INS_MOVDQA:
    case X86_INS_MOVDQU:
    case X86_INS_MOVAPS:
    case X86_INS_MOVUPS:
    case X86_INS_VMOVDQA:
    case X86_INS_VMOVDQU:
    case X86_INS_VMOVAPS:
    case X86_INS_VMOVUPS:
      return true;
    default:
      return false;
  }
}

// What the straight-line walk through the constructor has seen.
struct ConstructorFacts {
  std::set<uint64_t> all_ones_stores;  // offsets into *this that received 8 bytes of ones
  std::optional<uint64_t> thread_id_store;
};

class ConstructorWalk {
 public:
  ConstructorWalk(const SectionMap& sections, std::vector<uint64_t> thread_id_functions)
      : sections_(sections), thread_id_functions_(std::move(thread_id_functions)) {
    holds_this_[kRdi] = true;
  }

  // Follows the code from `entry` in address order (conditional branches fall through; the
  // constructor's only branch skips the anomaly-mode calls) until thread_id_ is stored, a
  // ret or jmp, or the budget runs out. Once per ConstructorWalk.
  ConstructorFacts walk(uint64_t entry) {
    X86Disassembler disassembler;
    uint64_t address = entry;
    for (int budget = kInstructionBudget; budget > 0; --budget) {
      const cs_insn* instruction = disassembler.decode(address, sections_.bytes_at(address));
      if (instruction == nullptr) break;
      address = instruction->address + instruction->size;
      if (disassembler.in_group(instruction, CS_GRP_RET) || instruction->id == X86_INS_JMP) {
        break;
      }
      if (disassembler.in_group(instruction, CS_GRP_CALL)) {
        note_call(instruction->detail->x86);
        continue;
      }
      note_store(*instruction);
      if (facts_.thread_id_store) break;
      track_registers(disassembler, *instruction, address);
    }
    return facts_;
  }

 private:
  void note_call(const cs_x86& x86) {
    const bool calls_current_thread_id =
        x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM &&
        std::find(thread_id_functions_.begin(), thread_id_functions_.end(),
                  static_cast<uint64_t>(x86.operands[0].imm)) != thread_id_functions_.end();
    for (size_t index : kCallerSavedRegisters) holds_this_[index] = false;
    xmm_constants_.clear();  // every vector register is caller-saved
    rax_holds_thread_id_ = calls_current_thread_id;
  }

  // The offset into *this a memory operand designates, if it is `this + displacement`.
  std::optional<uint64_t> this_offset(const cs_x86_op& operand) const {
    if (operand.type != X86_OP_MEM) return std::nullopt;
    const x86_op_mem& memory = operand.mem;
    if (memory.index != X86_REG_INVALID || memory.segment != X86_REG_INVALID) return std::nullopt;
    const std::optional<size_t> base = general_register_index(memory.base);
    if (!base || !holds_this_[*base]) return std::nullopt;
    return static_cast<uint64_t>(memory.disp);
  }

  void note_store(const cs_insn& instruction) {
    const cs_x86& x86 = instruction.detail->x86;
    if (x86.op_count != 2) return;
    const std::optional<uint64_t> offset = this_offset(x86.operands[0]);
    if (!offset) return;
    const cs_x86_op& source = x86.operands[1];
    if (source.type == X86_OP_IMM && x86.operands[0].size == 8 &&
        static_cast<uint64_t>(source.imm) == kAllOnes) {
      facts_.all_ones_stores.insert(*offset);
    } else if (is_xmm(source) && x86.operands[0].size == 16) {
      if (auto constant = xmm_constants_.find(source.reg); constant != xmm_constants_.end()) {
        for (size_t half = 0; half < 2; ++half) {
          if (constant->second[half] == kAllOnes) facts_.all_ones_stores.insert(*offset + 8 * half);
        }
      }
    } else if (source.type == X86_OP_REG && source.reg == X86_REG_RAX && rax_holds_thread_id_) {
      facts_.thread_id_store = *offset;
    }
  }

  void track_registers(const X86Disassembler& disassembler, const cs_insn& instruction,
                       uint64_t next_address) {
    const cs_x86& x86 = instruction.detail->x86;
    if (x86.op_count >= 1 && is_xmm(x86.operands[0])) {
      // A 16-byte load of a RIP-relative constant (movdqa/movaps/...), or anything else that
      // makes the register's value unknown here.
      xmm_constants_.erase(x86.operands[0].reg);
      const cs_x86_op& source = x86.operands[1];
      if (is_vector_move(instruction.id) && x86.op_count == 2 && source.type == X86_OP_MEM &&
          source.size == 16 && source.mem.base == X86_REG_RIP &&
          source.mem.index == X86_REG_INVALID) {
        const std::string_view bytes =
            sections_.bytes_at(next_address + static_cast<uint64_t>(source.mem.disp));
        if (bytes.size() >= 16) {
          std::array<uint64_t, 2> constant{};
          std::memcpy(constant.data(), bytes.data(), sizeof(constant));
          xmm_constants_[x86.operands[0].reg] = constant;
        }
      }
      return;
    }
    const bool copies_register = instruction.id == X86_INS_MOV && x86.op_count == 2 &&
                                 is_64_bit_register(x86.operands[0]) &&
                                 is_64_bit_register(x86.operands[1]);
    const bool copies_this =
        copies_register && holds_this_[*general_register_index(x86.operands[1].reg)];
    for (size_t index : disassembler.written_registers(&instruction)) {
      holds_this_[index] = false;
      if (index == kRax) rax_holds_thread_id_ = false;
    }
    if (copies_this) holds_this_[*general_register_index(x86.operands[0].reg)] = true;
  }

  const SectionMap& sections_;
  const std::vector<uint64_t> thread_id_functions_;
  std::array<bool, kGeneralRegisterCount> holds_this_{};
  std::map<unsigned, std::array<uint64_t, 2>> xmm_constants_;
  bool rax_holds_thread_id_ = false;
  ConstructorFacts facts_;
};

}  // namespace

NodeFieldOffsets find_node_field_offsets(const ElfFile& elf, const DefinedSymbols& symbols,
                                         const Relocations& relocations,
                                         const SectionMap& sections) {
  NodeFieldOffsets offsets;
  const DefinedSymbol* constructor = symbols.find_first(kAccumulateGradConstructors);
  const DefinedSymbol* current_thread_id = symbols.find(kCurrentThreadId);
  if (!constructor || !current_thread_id) {
    offsets.source =
        "no Node offsets: AccumulateGrad::AccumulateGrad(at::Tensor) or "
        "RecordFunction::currentThreadId() is not exported";
    return offsets;
  }
  std::vector<uint64_t> thread_id_functions = plt_stubs_for(elf, relocations, {kCurrentThreadId});
  thread_id_functions.push_back(current_thread_id->address);

  const ConstructorFacts facts =
      ConstructorWalk(sections, std::move(thread_id_functions)).walk(constructor->address);
  const std::string where =
      "AccumulateGrad::AccumulateGrad(at::Tensor) at " + hex(constructor->address);
  if (!facts.thread_id_store) {
    offsets.source = "no Node offsets: " + where + " stores no currentThreadId() into *this";
    return offsets;
  }
  if (facts.all_ones_stores.size() != 1) {
    offsets.source = "no Node offsets: " + where + " stores UINT64_MAX at " +
                     std::to_string(facts.all_ones_stores.size()) +
                     " offsets before thread_id_, expected 1 (sequence_nr_)";
    return offsets;
  }
  const uint64_t sequence_nr = *facts.all_ones_stores.begin();
  // Node declares sequence_nr_ before thread_id_, both after the vptr.
  if (sequence_nr == 0 || sequence_nr >= *facts.thread_id_store) {
    offsets.source = "no Node offsets: " + where + " gives sequence_nr_ " + hex(sequence_nr) +
                     ", thread_id_ " + hex(*facts.thread_id_store) +
                     ", which contradict Node's declaration order";
    return offsets;
  }
  offsets.sequence_nr = static_cast<uint32_t>(sequence_nr);
  offsets.thread_id = static_cast<uint32_t>(*facts.thread_id_store);
  offsets.source = "Node::sequence_nr_ @" + hex(sequence_nr) + ", thread_id_ @" +
                   hex(*facts.thread_id_store) + " from the Node(UINT64_MAX) inlined in " + where;
  return offsets;
}

}  // namespace tprof::symbolizer
