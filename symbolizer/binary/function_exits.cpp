#include "symbolizer/binary/function_exits.h"

#include <algorithm>
#include <deque>
#include <optional>
#include <set>

#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// A function and its cold fragments are a handful of FDEs; a tail call chain beyond this is not
// followed further (a range whose `ret` is missed is closed later, flagged, by the BPF side).
constexpr size_t kMaxFragments = 8;

// The target of a direct jmp/jcc; nullopt for a jump through a register or memory.
std::optional<uint64_t> direct_target(const cs_insn* instruction) {
  const cs_x86& x86 = instruction->detail->x86;
  if (x86.op_count != 1 || x86.operands[0].type != X86_OP_IMM) return std::nullopt;
  return static_cast<uint64_t>(x86.operands[0].imm);
}

}  // namespace

FunctionExits FunctionExitFinder::exits_of(uint64_t function_address) {
  FunctionExits exits;
  std::set<uint64_t> fragments_seen;  // by start address
  std::deque<AddressRange> to_scan;
  const auto enqueue_fragment = [&](uint64_t address) {
    const auto fragment = bounds_.function_containing(address);
    if (!fragment || fragments_seen.contains(fragment->start)) return;
    if (fragments_seen.size() == kMaxFragments) return;
    fragments_seen.insert(fragment->start);
    to_scan.push_back(*fragment);
  };
  enqueue_fragment(function_address);

  while (!to_scan.empty()) {
    const AddressRange fragment = to_scan.front();
    to_scan.pop_front();
    // A linear sweep: an FDE covers only its function's code (x86-64 keeps jump tables in
    // .rodata), so every instruction in it is decoded, reachable or not.
    std::string_view code = sections_.bytes_at(fragment.start);
    code = code.substr(0, std::min<uint64_t>(code.size(), fragment.end - fragment.start));
    uint64_t address = fragment.start;
    while (!code.empty()) {
      const cs_insn* instruction = disassembler_.decode(address, code);
      const size_t size = instruction ? instruction->size : 1;  // skip a byte that does not decode
      if (instruction && disassembler_.in_group(instruction, CS_GRP_RET)) {
        exits.returns.push_back(address);
      } else if (instruction && disassembler_.in_group(instruction, CS_GRP_JUMP)) {
        // Out of this fragment: into a cold block of the same function, or a tail call.
        const auto target = direct_target(instruction);
        if (target && (*target < fragment.start || *target >= fragment.end)) enqueue_fragment(*target);
      }
      address += size;
      code.remove_prefix(size);
    }
  }
  exits.fragments = fragments_seen.size();
  std::sort(exits.returns.begin(), exits.returns.end());
  exits.returns.erase(std::unique(exits.returns.begin(), exits.returns.end()), exits.returns.end());
  return exits;
}

}  // namespace tprof::symbolizer
