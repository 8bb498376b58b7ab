#include "symbolizer/autograd/named_scopes.h"

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <set>

#include "symbolizer/binary/call_sites.h"
#include "symbolizer/binary/function_bounds.h"
#include "symbolizer/binary/plt_stubs.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

constexpr size_t kNameBytesMax = 128;
constexpr size_t kRsp = 7;
constexpr size_t kRbp = 6;
constexpr unsigned kVectorRegisters = 16;
constexpr std::string_view kBeforePrefix = "_ZN2at14RecordFunction6beforeE";

// How an overload of at::RecordFunction::before takes the range's name (rdi is `this`).
enum class NamePassing {
  kInRsi,    // before(const char* name, int64_t sequence_nr)
  kOnStack,  // before(std::variant<std::string_view, ...> name, int64_t sequence_nr): the variant,
             // 24 bytes, goes on the stack; at the call the view's length is at (%rsp), its
             // pointer at 8(%rsp)
};

struct BeforeOverload {
  std::string_view symbol;
  NamePassing passing;
};

constexpr std::array<BeforeOverload, 2> kOverloads = {{
    {"_ZN2at14RecordFunction6beforeEPKcl", NamePassing::kInRsi},
    {"_ZN2at14RecordFunction6beforeESt7variantIJSt17basic_string_viewIcSt11char_traitsIcEESt17reference_"
     "wrapperIKN3c1014FunctionSchemaEEEEl",
     NamePassing::kOnStack},
}};

// The NUL-terminated printable string at `address`; nullopt for anything else.
std::optional<std::string> literal_at(const SectionMap& sections, uint64_t address) {
  const std::string_view bytes = sections.bytes_at(address);
  const size_t end = bytes.find('\0');
  if (end == std::string_view::npos || end == 0 || end > kNameBytesMax) return std::nullopt;
  const std::string_view text = bytes.substr(0, end);
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) return std::nullopt;
  return std::string(text);
}

std::optional<unsigned> xmm_number(unsigned reg) {
  if (reg >= X86_REG_XMM0 && reg < X86_REG_XMM0 + kVectorRegisters) return reg - X86_REG_XMM0;
  return std::nullopt;
}

// The constants and addresses (`lea name(%rip),%rax`, `movq $6,-0x1c0(%rbp)`) that general
// registers, xmm registers and the frame hold, followed through moves, 16-byte copies and calls
// one instruction at a time. Frame words are keyed by base register (rsp or rbp) and offset.
class KnownWords {
 public:
  using Eightbytes = std::array<std::optional<uint64_t>, 2>;  // what a move copies: low, high

  void step(const X86Disassembler& disassembler, const cs_insn* instruction) {
    const std::optional<Eightbytes> moved = moved_words(instruction);
    forget_writes(disassembler, instruction);
    if (moved) put(instruction->detail->x86.operands[0], *moved);
  }

  // Keeps what `other`, the words along another path here, agrees on.
  void meet(const KnownWords& other) {
    for (size_t i = 0; i < kGeneralRegisterCount; ++i)
      if (registers_[i] != other.registers_[i]) registers_[i].reset();
    for (unsigned i = 0; i < kVectorRegisters; ++i)
      for (size_t half = 0; half < 2; ++half)
        if (vectors_[i][half] != other.vectors_[i][half]) vectors_[i][half].reset();
    std::erase_if(memory_, [&](const auto& word) { return other.word_at(word.first) != word.second; });
  }

  std::optional<uint64_t> in_register(size_t reg) const { return registers_[reg]; }

  std::optional<uint64_t> on_stack(int64_t offset) const { return word_at({X86_REG_RSP, offset}); }

 private:
  using Slot = std::pair<unsigned, int64_t>;  // base register, displacement

  // What a `lea` of a static address, a `mov` or a 16-byte vector move copies; nullopt for any
  // other instruction.
  std::optional<Eightbytes> moved_words(const cs_insn* instruction) const {
    const cs_x86& x86 = instruction->detail->x86;
    if (x86.op_count != 2) return std::nullopt;
    const cs_x86_op& source = x86.operands[1];
    if (instruction->id == X86_INS_LEA && source.mem.base == X86_REG_RIP)
      return Eightbytes{instruction->address + instruction->size + source.mem.disp};
    const bool copies_16 = is_16_byte_move(instruction->id) && x86.operands[0].size == 16;
    if (instruction->id != X86_INS_MOV && !copies_16) return std::nullopt;
    if (source.type == X86_OP_IMM) return Eightbytes{static_cast<uint64_t>(source.imm) & mask(x86.operands[0].size)};
    if (source.type == X86_OP_MEM) {
      const auto slot = frame_slot(source.mem);
      if (!slot) return std::nullopt;
      return Eightbytes{word_at(*slot), copies_16 ? word_at({slot->first, slot->second + 8}) : std::nullopt};
    }
    if (const auto xmm = xmm_number(source.reg)) return vectors_[*xmm];
    if (is_64_bit_register(source)) return Eightbytes{registers_[*general_register_index(source.reg)]};
    return std::nullopt;
  }

  void put(const cs_x86_op& destination, const Eightbytes& words) {
    if (destination.type == X86_OP_MEM) {
      const auto slot = frame_slot(destination.mem);
      if (!slot || destination.size < 8) return;
      if (words[0]) memory_[*slot] = *words[0];
      if (words[1] && destination.size == 16) memory_[{slot->first, slot->second + 8}] = *words[1];
    } else if (const auto xmm = xmm_number(destination.reg)) {
      vectors_[*xmm] = words;
    } else if (destination.size >= 4 && words[0]) {  // a 32-bit write zero-extends
      registers_[*general_register_index(destination.reg)] = *words[0] & mask(destination.size);
    }
  }

  // Registers and frame words the instruction writes lose what they held. A call loses the
  // registers the callee may change, and the frame: the callee may write the words whose
  // address it was given. A constant adjustment of rsp moves the rsp-relative keys; any other
  // write of rsp or rbp forgets the words relative to it.
  void forget_writes(const X86Disassembler& disassembler, const cs_insn* instruction) {
    const std::vector<size_t> written = disassembler.written_registers(instruction);
    for (const size_t reg : written) registers_[reg].reset();
    for (const unsigned reg : disassembler.written_vector_registers(instruction))
      if (reg < kVectorRegisters) vectors_[reg] = {};
    if (disassembler.in_group(instruction, CS_GRP_CALL)) {
      for (const size_t reg : kCallerSavedRegisters) registers_[reg].reset();
      vectors_.fill({});
      memory_.clear();
      return;
    }
    forget_memory_writes(instruction);
    if (std::find(written.begin(), written.end(), kRbp) != written.end()) forget_base(X86_REG_RBP);
    if (std::find(written.begin(), written.end(), kRsp) != written.end()) follow_stack_pointer(instruction);
  }

  void forget_memory_writes(const cs_insn* instruction) {
    const cs_x86& x86 = instruction->detail->x86;
    for (uint8_t i = 0; i < x86.op_count; ++i) {
      const cs_x86_op& operand = x86.operands[i];
      if (operand.type != X86_OP_MEM || !(operand.access & CS_AC_WRITE)) continue;
      const auto slot = frame_slot(operand.mem);
      if (!slot) continue;  // only the frame's own words matter
      const int64_t size = operand.size > 0 ? operand.size : 8;  // 0: size unknown
      std::erase_if(memory_, [&](const auto& word) {
        const auto& [base, offset] = word.first;
        return base == slot->first && offset < slot->second + size && slot->second < offset + 8;
      });
    }
  }

  // Keys rsp-relative words to rsp's new value; those it left below it are freed.
  void follow_stack_pointer(const cs_insn* instruction) {
    const cs_x86& x86 = instruction->detail->x86;
    int64_t lowered = 0;  // how far rsp moved down
    if (instruction->id == X86_INS_PUSH) {
      lowered = 8;
    } else if ((instruction->id == X86_INS_SUB || instruction->id == X86_INS_ADD) &&
               x86.operands[1].type == X86_OP_IMM) {
      lowered = instruction->id == X86_INS_SUB ? x86.operands[1].imm : -x86.operands[1].imm;
    } else {
      return forget_base(X86_REG_RSP);
    }
    std::map<Slot, uint64_t> moved;
    for (const auto& [slot, word] : memory_) {
      if (slot.first != X86_REG_RSP) {
        moved[slot] = word;
      } else if (slot.second + lowered >= 0) {
        moved[{slot.first, slot.second + lowered}] = word;
      }
    }
    memory_ = std::move(moved);
  }

  void forget_base(unsigned base) {
    std::erase_if(memory_, [&](const auto& word) { return word.first.first == base; });
  }

  std::optional<uint64_t> word_at(const Slot& slot) const {
    const auto found = memory_.find(slot);
    return found == memory_.end() ? std::nullopt : std::optional<uint64_t>(found->second);
  }

  static std::optional<Slot> frame_slot(const x86_op_mem& mem) {
    if (mem.index != X86_REG_INVALID || mem.segment != X86_REG_INVALID) return std::nullopt;
    if (mem.base != X86_REG_RSP && mem.base != X86_REG_RBP) return std::nullopt;
    return Slot{mem.base, mem.disp};
  }

  static bool is_16_byte_move(unsigned id) {
    static constexpr std::array kMoves = {X86_INS_MOVAPS, X86_INS_MOVUPS, X86_INS_MOVDQA, X86_INS_MOVDQU,
                                          X86_INS_VMOVAPS, X86_INS_VMOVUPS, X86_INS_VMOVDQA, X86_INS_VMOVDQU};
    return std::find(kMoves.begin(), kMoves.end(), id) != kMoves.end();
  }

  static uint64_t mask(uint8_t size) { return size >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * size)) - 1; }

  std::array<std::optional<uint64_t>, kGeneralRegisterCount> registers_;
  std::array<Eightbytes, kVectorRegisters> vectors_{};
  std::map<Slot, uint64_t> memory_;
};

// What one more way into an instruction knows joins what the others did; nullopt: no way
// seen.
void merge(std::optional<KnownWords>& into, const std::optional<KnownWords>& other) {
  if (!other) return;
  if (into) {
    into->meet(*other);
  } else {
    into = other;
  }
}

// The target of a jcc or jmp that lies ahead, before `site`.
std::optional<uint64_t> forward_target(const X86Disassembler& disassembler, const cs_insn* instruction, uint64_t site) {
  const cs_x86& x86 = instruction->detail->x86;
  if (!disassembler.in_group(instruction, CS_GRP_JUMP) || x86.op_count != 1 || x86.operands[0].type != X86_OP_IMM)
    return std::nullopt;
  const auto target = static_cast<uint64_t>(x86.operands[0].imm);
  if (target <= instruction->address || target > site) return std::nullopt;
  return target;
}

// The words known at `site`, disassembling from the function's entry in address order: the
// code that sets up a call's arguments lies right before it, and GCC lays out the blocks that
// lead there forward, so that an instruction starts with what the ways into it seen so far
// (falling through, forward jumps) agree on; with none seen (only backward jumps lead there),
// with nothing known. The nop padding after a jmp or ret is no way in: nothing runs it.
// nullopt when the site is not on an instruction boundary (an e8 or e9 byte inside another
// instruction).
std::optional<KnownWords> words_at(const SectionMap& sections, uint64_t function_start, uint64_t site) {
  X86Disassembler disassembler;
  std::map<uint64_t, std::optional<KnownWords>> jumped_to;  // what forward jumps carry there
  std::optional<KnownWords> words = KnownWords{};           // nullopt after a jmp or ret
  uint64_t address = function_start;
  while (address < site) {
    const cs_insn* instruction = disassembler.decode(address, sections.bytes_at(address));
    if (instruction == nullptr) return std::nullopt;
    if (const auto jumps = jumped_to.extract(address)) merge(words, jumps.mapped());
    if (!words && instruction->id != X86_INS_NOP) words.emplace();
    if (words) words->step(disassembler, instruction);
    if (const auto target = forward_target(disassembler, instruction, site)) merge(jumped_to[*target], words);
    if (instruction->id == X86_INS_JMP || disassembler.in_group(instruction, CS_GRP_RET)) words.reset();
    address = instruction->address + instruction->size;
  }
  if (address != site) return std::nullopt;
  if (const auto jumps = jumped_to.extract(site)) merge(words, jumps.mapped());
  return words ? words : KnownWords{};
}

// The literal a call at `call_site` passes as the name; nullopt when it passes anything else.
std::optional<std::string> name_passed_at(const SectionMap& sections, uint64_t function_start, uint64_t call_site,
                                          NamePassing passing) {
  const auto words = words_at(sections, function_start, call_site);
  if (!words) return std::nullopt;
  if (passing == NamePassing::kInRsi) {
    const auto name = words->in_register(kRsi);
    return name ? literal_at(sections, *name) : std::nullopt;
  }
  const auto length = words->on_stack(0);
  const auto pointer = words->on_stack(8);
  if (!length || !pointer) return std::nullopt;
  auto name = literal_at(sections, *pointer);
  if (!name || name->size() != *length) return std::nullopt;
  return name;
}

// The functions that end in a tail jump to one of `targets`, passing on the name their own
// caller gave them: torch 2.14's out-of-line copies of the template before(fn, inputs, seq).
// A sibling call leaves stack arguments where the caller's were, so a call to one of them
// passes the name as a call to before() would.
std::vector<uint64_t> forwarders_to(const SectionMap& sections, const FunctionBounds& functions,
                                    const std::vector<uint64_t>& targets) {
  std::set<uint64_t> starts;
  for (const uint64_t jump : direct_jumps_to(sections, targets)) {
    const auto function = functions.function_containing(jump);
    if (function && words_at(sections, function->start, jump)) starts.insert(function->start);
  }
  return {starts.begin(), starts.end()};
}

// What the search found, for the summary lines.
struct Tally {
  size_t exported = 0;  // overloads of before() the library exports
  size_t calls = 0;
  size_t unnamed = 0;  // calls without a literal name
  size_t ambiguous = 0;  // functions naming several ranges: which one runs is not known
};

void find_calls_of(const LibraryIndex& library, const FunctionBounds& functions, const BeforeOverload& overload,
                   std::map<uint64_t, std::set<std::string>>& names_by_function, Tally& tally) {
  const DefinedSymbol* before = library.symbols.find(overload.symbol);
  if (before == nullptr) return;
  ++tally.exported;
  std::vector<uint64_t> targets = plt_stubs_for(library.elf, library.relocations, {overload.symbol});
  targets.push_back(before->address);
  if (overload.passing == NamePassing::kOnStack) {
    const std::vector<uint64_t> forwarders = forwarders_to(library.sections, functions, targets);
    targets.insert(targets.end(), forwarders.begin(), forwarders.end());
  }
  for (const uint64_t call_site : direct_calls_to(library.sections, targets)) {
    const auto function = functions.function_containing(call_site);
    if (!function) continue;
    ++tally.calls;
    if (auto name = name_passed_at(library.sections, function->start, call_site, overload.passing)) {
      names_by_function[function->start].insert(std::move(*name));
    } else {
      ++tally.unnamed;
    }
  }
}

// Why a library yields no scope: the message names what changed, for the next torch to differ.
std::string why_none(const LibraryIndex& library, const Tally& tally) {
  if (tally.exported == 0) {
    std::string exported;
    for (const DefinedSymbol& symbol : library.symbols.functions())
      if (symbol.name.starts_with(kBeforePrefix)) exported += " " + std::string(symbol.name);
    return "RecordFunction::before is not exported with a signature tprof reads the name from" +
           (exported.empty() ? std::string(" (it is not exported at all)") : "; it is:" + exported);
  }
  if (tally.calls == 0) return "no function calls RecordFunction::before directly";
  if (tally.unnamed == tally.calls)
    return "none of the " + std::to_string(tally.calls) +
           " calls of RecordFunction::before passes a string literal the way tprof reads it";
  return "each of the " + std::to_string(tally.ambiguous) +
         " functions calling RecordFunction::before names several ranges";
}

}  // namespace

NamedScopes find_named_scopes(const LibraryIndex& libtorch_cpu) {
  const FunctionBounds functions(libtorch_cpu.elf, libtorch_cpu.sections);
  std::map<uint64_t, std::set<std::string>> names_by_function;
  Tally tally;
  for (const BeforeOverload& overload : kOverloads)
    find_calls_of(libtorch_cpu, functions, overload, names_by_function, tally);
  NamedScopes found;
  for (const auto& [address, names] : names_by_function) {
    if (names.size() == 1) {
      found.scopes.push_back({address, *names.begin()});
    } else {
      ++tally.ambiguous;
    }
  }
  found.source = std::to_string(found.scopes.size()) + " named C++ scopes; left out: " + std::to_string(tally.unnamed) +
                 " calls of RecordFunction::before without a literal name, " + std::to_string(tally.ambiguous) +
                 " functions naming several";
  if (found.scopes.empty()) found.why_none = why_none(libtorch_cpu, tally);
  return found;
}

}  // namespace tprof::symbolizer
