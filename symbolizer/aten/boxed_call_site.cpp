#include "symbolizer/aten/boxed_call_site.h"

#include <vector>

#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// torch::jit::invokeOperatorFromPython(...), whatever its parameters mangle to in a release
// (pybind11::args by value in 1.13, by reference since; c10:: or std::optional).
constexpr std::string_view kInvokeOperatorPrefix = "_ZN5torch3jit24invokeOperatorFromPython";

// A function this short that only forwards is a thunk; the body proper is hundreds of bytes.
constexpr uint64_t kThunkBytesMax = 0x100;

const DefinedSymbol* find_invoke_operator(const DefinedSymbols& symbols) {
  for (const DefinedSymbol& function : symbols.functions())
    if (function.name.starts_with(kInvokeOperatorPrefix) && function.size > 0) return &function;
  return nullptr;
}

bool in_same_section(const SectionMap& sections, uint64_t address, uint64_t other) {
  const std::string_view from = sections.bytes_at(address), rest = sections.bytes_at(other);
  return !from.empty() && !rest.empty() && from.data() + from.size() == rest.data() + rest.size();
}

// What a thunk's instructions show: the targets of its direct calls into its own section (a
// call through the PLT, __stack_chk_fail's, lands in another), and whether it loads both words
// of the vector rsi points at.
struct ThunkShape {
  std::vector<uint64_t> local_calls;
  bool reads_begin = false;
  bool reads_end = false;
};

void note_vector_load(const cs_insn* instruction, ThunkShape& shape) {
  const cs_x86& x86 = instruction->detail->x86;
  for (uint8_t at = 0; at < x86.op_count; ++at) {
    const cs_x86_op& operand = x86.operands[at];
    if (operand.type != X86_OP_MEM || operand.mem.base != X86_REG_RSI || operand.mem.index != X86_REG_INVALID)
      continue;
    if (operand.mem.disp == 0) shape.reads_begin = true;
    if (operand.mem.disp == 8) shape.reads_end = true;
  }
}

ThunkShape read_thunk(const LibraryIndex& index, const DefinedSymbol& function) {
  ThunkShape shape;
  X86Disassembler disassembler;
  std::string_view code = index.sections.bytes_at(function.address);
  if (code.size() > function.size) code = code.substr(0, function.size);
  uint64_t address = function.address;
  while (!code.empty()) {
    const cs_insn* instruction = disassembler.decode(address, code);
    if (instruction == nullptr) break;
    note_vector_load(instruction, shape);
    const cs_x86& x86 = instruction->detail->x86;
    if (disassembler.in_group(instruction, CS_GRP_CALL) && x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM) {
      const auto target = static_cast<uint64_t>(x86.operands[0].imm);
      if (in_same_section(index.sections, target, function.address)) shape.local_calls.push_back(target);
    }
    address += instruction->size;
    code.remove_prefix(instruction->size);
  }
  return shape;
}

}  // namespace

std::optional<BoxedCallSite> find_boxed_call_site(const LibraryIndex& index) {
  const DefinedSymbol* invoke = find_invoke_operator(index.symbols);
  if (invoke == nullptr) return std::nullopt;
  if (invoke->size > kThunkBytesMax) return BoxedCallSite{invoke->address, BoxedCallSite::Operators::kVector};
  const ThunkShape thunk = read_thunk(index, *invoke);
  if (thunk.local_calls.size() != 1 || !thunk.reads_begin || !thunk.reads_end) return std::nullopt;
  return BoxedCallSite{thunk.local_calls.front(), BoxedCallSite::Operators::kSpan};
}

}  // namespace tprof::symbolizer
