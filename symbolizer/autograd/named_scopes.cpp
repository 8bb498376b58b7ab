#include "symbolizer/autograd/named_scopes.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "symbolizer/binary/call_sites.h"
#include "symbolizer/binary/function_bounds.h"
#include "symbolizer/binary/plt_stubs.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// at::RecordFunction::before(const char* name, int64_t sequence_nr): rdi = this, rsi = name.
constexpr std::string_view kBeforeWithName = "_ZN2at14RecordFunction6beforeEPKcl";
constexpr size_t kNameRegister = kRsi;
constexpr size_t kNameBytesMax = 128;

// The NUL-terminated printable string at `address`; nullopt for anything else.
std::optional<std::string> literal_at(const SectionMap& sections, uint64_t address) {
  const std::string_view bytes = sections.bytes_at(address);
  const size_t end = bytes.find('\0');
  if (end == std::string_view::npos || end == 0 || end > kNameBytesMax) return std::nullopt;
  const std::string_view text = bytes.substr(0, end);
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; })) return std::nullopt;
  return std::string(text);
}

// The literal rsi holds at `call_site`: disassembling from the function's entry in address
// order, the last write of rsi before the call must be `lea literal(%rip),%rsi`. nullopt when
// it is anything else, or the site is not on an instruction boundary (an e8 byte inside
// another instruction).
std::optional<std::string> name_passed_at(const SectionMap& sections, uint64_t function_start, uint64_t call_site) {
  X86Disassembler disassembler;
  std::optional<uint64_t> literal;
  uint64_t address = function_start;
  while (address < call_site) {
    const cs_insn* instruction = disassembler.decode(address, sections.bytes_at(address));
    if (instruction == nullptr) return std::nullopt;
    address = instruction->address + instruction->size;
    const std::vector<size_t> written = disassembler.written_registers(instruction);
    if (std::find(written.begin(), written.end(), kNameRegister) == written.end()) continue;
    const cs_x86& x86 = instruction->detail->x86;
    const bool loads_literal = instruction->id == X86_INS_LEA && x86.op_count == 2 &&
                               x86.operands[0].type == X86_OP_REG && x86.operands[0].reg == X86_REG_RSI &&
                               x86.operands[1].mem.base == X86_REG_RIP && x86.operands[1].mem.index == X86_REG_INVALID;
    literal = loads_literal ? std::optional<uint64_t>(address + x86.operands[1].mem.disp) : std::nullopt;
  }
  if (address != call_site || !literal) return std::nullopt;
  return literal_at(sections, *literal);
}

}  // namespace

NamedScopes find_named_scopes(const LibraryIndex& libtorch_cpu) {
  NamedScopes found;
  const DefinedSymbol* before = libtorch_cpu.symbols.find(kBeforeWithName);
  if (before == nullptr) {
    found.source = "no named C++ scopes: RecordFunction::before(const char*, long) is not exported";
    return found;
  }
  std::vector<uint64_t> targets = plt_stubs_for(libtorch_cpu.elf, libtorch_cpu.relocations, {kBeforeWithName});
  targets.push_back(before->address);
  const FunctionBounds functions(libtorch_cpu.elf, libtorch_cpu.sections);

  std::map<uint64_t, std::set<std::string>> names_by_function;
  size_t unnamed = 0;
  for (const uint64_t call_site : direct_calls_to(libtorch_cpu.sections, targets)) {
    const auto function = functions.function_containing(call_site);
    if (!function) continue;
    if (auto name = name_passed_at(libtorch_cpu.sections, function->start, call_site)) {
      names_by_function[function->start].insert(std::move(*name));
    } else {
      ++unnamed;
    }
  }
  size_t ambiguous = 0;
  for (const auto& [address, names] : names_by_function) {
    if (names.size() == 1) {
      found.scopes.push_back({address, *names.begin()});
    } else {
      ++ambiguous;  // one function opening ranges of several names: which one runs is not known
    }
  }
  found.source = std::to_string(found.scopes.size()) + " named C++ scopes; left out: " + std::to_string(unnamed) +
                 " calls of RecordFunction::before without a literal name, " + std::to_string(ambiguous) +
                 " functions naming several";
  return found;
}

}  // namespace tprof::symbolizer
