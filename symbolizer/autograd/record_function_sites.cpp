#include "symbolizer/autograd/record_function_sites.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>

#include "symbolizer/binary/call_sites.h"
#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/emulated_probe_point.h"
#include "symbolizer/binary/function_bounds.h"
#include "symbolizer/binary/hex_text.h"
#include "symbolizer/binary/plt_stubs.h"
#include "symbolizer/binary/relocations.h"
#include "symbolizer/binary/section_map.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// Calls name either of the constructor's C1 and C2 symbols (one body).
constexpr std::array<std::string_view, 2> kScopeConstructors = {
    "_ZN2at14RecordFunctionC1ENS_11RecordScopeE",
    "_ZN2at14RecordFunctionC2ENS_11RecordScopeE",
};
constexpr std::string_view kEnd = "_ZN2at14RecordFunction3endEv";
// The exported kernel; a call site inside any other exported function (rpc's
// UserRRef::toHere and c10d's Work record USER_SCOPE events of their own) is not a
// record_function kernel. The legacy kernel, record_function_enter_legacy, is static.
constexpr std::string_view kExportedKernelPrefix =
    "_ZN5torch8autograd8profiler25record_function_enter_newE";

constexpr int64_t kUserScope = 7;  // at::RecordScope::USER_SCOPE
constexpr size_t kSecondArgument = kRsi;  // System V
constexpr size_t kCallLength = 5;          // call rel32
// The kernels call record_function_enter a few instructions after the constructor.
constexpr int kInstructionsToNextCall = 32;

// What a function does around one call of the constructor.
struct CallSiteFacts {
  // The last write to rsi before the call is `mov $7, %esi`, with no call in between.
  bool passes_user_scope = false;
  // The first call after the constructor gets, as its first argument, the function's own
  // second argument, kept unchanged across the calls before: the kernels hand the name on to
  // record_function_enter(name, args, rec) right away. (Other USER_SCOPE RecordFunctions,
  // c10d's async-work profiling for one, first check whether the RecordFunction is active.)
  bool hands_name_on = false;
};

// Which general registers hold the function's second argument (rsi at entry), along a
// straight-line walk; moves copy it, calls and other writes lose it.
class NameTracker {
 public:
  NameTracker() { holds_name_[kSecondArgument] = true; }

  bool in(size_t index) const { return holds_name_[index]; }

  void after_call() {
    for (size_t index : kCallerSavedRegisters) holds_name_[index] = false;
  }

  void after(const cs_insn& instruction, const std::vector<size_t>& written) {
    const cs_x86& x86 = instruction.detail->x86;
    const bool copies_name = instruction.id == X86_INS_MOV && x86.op_count == 2 &&
                             is_64_bit_register(x86.operands[0]) &&
                             is_64_bit_register(x86.operands[1]) &&
                             holds_name_[*general_register_index(x86.operands[1].reg)];
    for (size_t index : written) holds_name_[index] = false;
    if (copies_name) holds_name_[*general_register_index(x86.operands[0].reg)] = true;
  }

 private:
  std::array<bool, kGeneralRegisterCount> holds_name_{};
};

bool is_move_of_user_scope(const cs_insn& instruction) {
  const cs_x86& x86 = instruction.detail->x86;
  return instruction.id == X86_INS_MOV && x86.op_count == 2 && x86.operands[0].type == X86_OP_REG &&
         (x86.operands[0].reg == X86_REG_ESI || x86.operands[0].reg == X86_REG_RSI) &&
         x86.operands[1].type == X86_OP_IMM && x86.operands[1].imm == kUserScope;
}

// Disassembles from the function's entry, in address order (conditional branches fall
// through), to the call site and on to the next call. nullopt when the site is not on an
// instruction boundary: the e8 byte was part of another instruction.
std::optional<CallSiteFacts> examine_call_site(const SectionMap& sections, uint64_t function_start,
                                               uint64_t call_site) {
  X86Disassembler disassembler;
  CallSiteFacts facts;
  NameTracker name;
  uint64_t address = function_start;
  while (address < call_site) {
    const cs_insn* instruction = disassembler.decode(address, sections.bytes_at(address));
    if (instruction == nullptr) return std::nullopt;
    address = instruction->address + instruction->size;
    if (disassembler.in_group(instruction, CS_GRP_CALL)) {
      facts.passes_user_scope = false;  // the callee may change esi
      name.after_call();
      continue;
    }
    const std::vector<size_t> written = disassembler.written_registers(instruction);
    if (std::find(written.begin(), written.end(), kSecondArgument) != written.end()) {
      facts.passes_user_scope = is_move_of_user_scope(*instruction);
    }
    name.after(*instruction, written);
  }
  if (address != call_site) return std::nullopt;

  name.after_call();  // the constructor's
  address = call_site + kCallLength;
  for (int budget = kInstructionsToNextCall; budget > 0; --budget) {
    const cs_insn* instruction = disassembler.decode(address, sections.bytes_at(address));
    if (instruction == nullptr || disassembler.in_group(instruction, CS_GRP_RET) ||
        instruction->id == X86_INS_JMP) {
      break;
    }
    address = instruction->address + instruction->size;
    if (disassembler.in_group(instruction, CS_GRP_CALL)) {
      facts.hands_name_on = name.in(kRdi);
      break;
    }
    name.after(*instruction, disassembler.written_registers(instruction));
  }
  return facts;
}

}  // namespace

RecordFunctionSites find_record_function_sites(const LibraryIndex& libtorch_cpu) {
  const SectionMap& sections = libtorch_cpu.sections;
  const DefinedSymbols& symbols = libtorch_cpu.symbols;
  const Relocations& relocations = libtorch_cpu.relocations;
  const FunctionBounds functions(libtorch_cpu.elf, sections);
  RecordFunctionSites sites;
  // end() reads `this` (rdi); its isActive() test comes first, and the jump after it is a
  // cheap place for the probe (emulated_probe_point.h).
  if (const DefinedSymbol* end = symbols.find(kEnd)) {
    DefinedSymbol probed = *end;
    probed.address = conditional_jump_probe_address(sections, end->address, kRdi);
    sites.end = probe_offset(&probed, sections);
  }

  const DefinedSymbol* constructor = symbols.find_first(kScopeConstructors);
  if (constructor == nullptr) {
    sites.source = "RecordFunction::RecordFunction(RecordScope) is not exported";
    return sites;
  }
  sites.user_scope_constructor = probe_offset(constructor, sections);

  // Code of the same library reaches an exported function through its PLT entry (another
  // module could interpose it), or directly when linked -Bsymbolic.
  std::vector<uint64_t> targets = plt_stubs_for(
      libtorch_cpu.elf, relocations,
      std::vector<std::string_view>(kScopeConstructors.begin(), kScopeConstructors.end()));
  targets.push_back(constructor->address);

  std::map<uint64_t, std::string> kept;      // function start -> how it was found
  std::map<uint64_t, std::string> excluded;  // function start -> why not
  for (uint64_t call_site : direct_calls_to(sections, targets)) {
    const std::optional<AddressRange> function = functions.function_containing(call_site);
    if (!function || kept.contains(function->start) || excluded.contains(function->start)) {
      continue;
    }
    const std::optional<CallSiteFacts> facts =
        examine_call_site(sections, function->start, call_site);
    if (!facts || !facts->passes_user_scope) continue;
    const DefinedSymbol* exported = symbols.function_containing(call_site);
    if (exported && !exported->name.starts_with(kExportedKernelPrefix)) {
      excluded[function->start] = std::string(exported->name) + " (another exported function)";
    } else if (!facts->hands_name_on) {
      excluded[function->start] =
          hex(function->start) + " (does not pass its second argument on after the constructor)";
    } else {
      kept[function->start] =
          exported ? std::string(exported->name) : "local " + hex(function->start);
    }
  }

  std::string kept_text, excluded_text;
  for (const auto& [start, description] : kept) {
    if (const std::optional<uint64_t> offset = sections.file_offset_of(start)) {
      sites.enter_functions.push_back(*offset);
      kept_text += (kept_text.empty() ? "" : ", ") + description;
    }
  }
  for (const auto& [start, reason] : excluded) {
    excluded_text += (excluded_text.empty() ? "" : ", ") + reason;
  }
  sites.source = std::to_string(sites.enter_functions.size()) +
                 " record_function kernels calling RecordFunction(USER_SCOPE): " +
                 (kept_text.empty() ? "none" : kept_text) +
                 "; left out: " + (excluded_text.empty() ? "none" : excluded_text);
  return sites;
}

}  // namespace tprof::symbolizer
