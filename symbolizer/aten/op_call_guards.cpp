#include "symbolizer/aten/op_call_guards.h"

#include <algorithm>
#include <optional>
#include <set>

#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// The guard test comes within the first few dozen instructions (the 1.13 build's add.Tensor:
// the 12th), and the __cxa_guard_acquire call right after it or a few instructions into the
// out-of-line block a conditional jump leads to (the 1.13 build's fft_ifft2).
constexpr int kInstructionsSearched = 48;
constexpr int kInstructionsAtABranch = 8;

// The address a rip-relative memory operand names, and whether it is a byte.
struct RipOperand {
  uint64_t address = 0;
  bool is_byte = false;
};

std::optional<RipOperand> rip_operand(const cs_insn* instruction) {
  const cs_x86& x86 = instruction->detail->x86;
  for (uint8_t index = 0; index < x86.op_count; ++index) {
    const cs_x86_op& operand = x86.operands[index];
    if (operand.type != X86_OP_MEM || operand.mem.base != X86_REG_RIP) continue;
    return RipOperand{instruction->address + instruction->size + static_cast<uint64_t>(operand.mem.disp),
                      operand.size == 1};
  }
  return std::nullopt;
}

// What scan() noted: the rip-relative bytes tested, the addresses taken, and where
// conditional jumps lead.
struct Scan {
  std::set<uint64_t> bytes_tested, addresses_taken, branch_targets;
};

// Decodes up to `count` instructions from `address` on, to the first jmp or ret.
void scan(X86Disassembler& disassembler, const SectionMap& sections, uint64_t address, int count, Scan& found) {
  for (; count > 0; --count) {
    const cs_insn* instruction = disassembler.decode(address, sections.bytes_at(address));
    if (instruction == nullptr) return;
    if (const auto operand = rip_operand(instruction)) {
      if (instruction->id == X86_INS_LEA)
        found.addresses_taken.insert(operand->address);
      else if (operand->is_byte && (instruction->id == X86_INS_MOVZX || instruction->id == X86_INS_CMP))
        found.bytes_tested.insert(operand->address);
    }
    if (disassembler.in_group(instruction, CS_GRP_JUMP) && instruction->id != X86_INS_JMP) {
      const cs_x86& x86 = instruction->detail->x86;
      if (x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM)
        found.branch_targets.insert(static_cast<uint64_t>(x86.operands[0].imm));
    }
    if (instruction->id == X86_INS_JMP || disassembler.in_group(instruction, CS_GRP_RET)) return;
    address = instruction->address + instruction->size;
  }
}

// The first byte the function tests that it also passes by address (to __cxa_guard_acquire):
// on the way in, or where a conditional jump leads (GCC moves the first call's set-up out of
// line in some ops).
uint64_t guard_of(X86Disassembler& disassembler, const SectionMap& sections, uint64_t function) {
  Scan found;
  scan(disassembler, sections, function, kInstructionsSearched, found);
  const std::set<uint64_t> targets = found.branch_targets;
  for (const uint64_t target : targets) scan(disassembler, sections, target, kInstructionsAtABranch, found);
  for (const uint64_t tested : found.bytes_tested)
    if (found.addresses_taken.contains(tested)) return tested;
  return 0;
}

}  // namespace

std::vector<uint64_t> find_op_call_guards(const SectionMap& sections, const std::vector<uint64_t>& op_addresses) {
  X86Disassembler disassembler;
  std::vector<uint64_t> guards;
  guards.reserve(op_addresses.size());
  for (const uint64_t function : op_addresses) guards.push_back(guard_of(disassembler, sections, function));
  return guards;
}

std::vector<bool> read_called_ops(const ProcessMemory& memory, uint64_t load_address,
                                  const std::vector<uint64_t>& guards, bool* unreadable) {
  std::vector<bool> called(guards.size(), true);
  // The guards lie together in .bss: read them in runs of nearby bytes, one read a run.
  constexpr uint64_t kLargestGap = 4096;
  std::vector<size_t> order;
  for (size_t op = 0; op < guards.size(); ++op)
    if (guards[op] != 0) order.push_back(op);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return guards[a] < guards[b]; });
  std::vector<unsigned char> run;
  for (size_t first = 0; first < order.size();) {
    size_t last = first;
    while (last + 1 < order.size() && guards[order[last + 1]] - guards[order[last]] <= kLargestGap) ++last;
    const uint64_t start = guards[order[first]];
    run.resize(guards[order[last]] - start + 1);
    if (!memory.read(load_address + start, run.data(), run.size())) {
      if (unreadable) *unreadable = true;
      return std::vector<bool>(guards.size(), true);
    }
    for (size_t at = first; at <= last; ++at) called[order[at]] = run[guards[order[at]] - start] != 0;
    first = last + 1;
  }
  if (unreadable) *unreadable = false;
  return called;
}

}  // namespace tprof::symbolizer
