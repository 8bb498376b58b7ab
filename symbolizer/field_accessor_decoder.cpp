#include "symbolizer/field_accessor_decoder.h"

#include <capstone/capstone.h>
#include <elf.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <stdexcept>
#include <unordered_map>

namespace tprof::symbolizer {

namespace {

// What a register is known to hold, relative to the function's entry.
enum class Origin {
  kUnknown,
  kArgumentPointer,  // rdi at entry + offset
  kGlobalPointer,    // &global + offset
  kFileAddress,      // an address in the ELF (offset holds it) outside the global
  kArgumentField,    // the 8 bytes loaded from rdi at entry + offset
  kGlobalField,      // the 8 bytes loaded from &global + offset
};

struct SymbolicValue {
  Origin origin = Origin::kUnknown;
  uint64_t offset = 0;
};

constexpr size_t kGeneralRegisterCount = 16;
using RegisterFile = std::array<SymbolicValue, kGeneralRegisterCount>;

constexpr size_t kRax = 0;
constexpr size_t kRdi = 5;
// What the System V ABI lets a called function change.
constexpr std::array<size_t, 9> kCallerSavedRegisters = {0, 2, 3, 4, 5, 8, 9, 10, 11};

// Accessors are a handful of instructions; the budget only stops a runaway walk through
// code that is not an accessor at all.
constexpr int kInstructionBudget = 256;
constexpr int kPathBudget = 16;

// The 64-bit register (as an index into RegisterFile) that `reg` is part of; writing any
// part of it changes what we know about the whole.
std::optional<size_t> general_register_index(unsigned reg) {
  static const std::array<std::array<unsigned, 5>, kGeneralRegisterCount> kFamilies = {{
      {X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL, X86_REG_AH},
      {X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL, X86_REG_BH},
      {X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH},
      {X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH},
      {X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL, X86_REG_SIL},
      {X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL, X86_REG_DIL},
      {X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL, X86_REG_BPL},
      {X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL, X86_REG_SPL},
      {X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B, X86_REG_R8B},
      {X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B, X86_REG_R9B},
      {X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B, X86_REG_R10B},
      {X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B, X86_REG_R11B},
      {X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B, X86_REG_R12B},
      {X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B, X86_REG_R13B},
      {X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B, X86_REG_R14B},
      {X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B, X86_REG_R15B},
  }};
  for (size_t index = 0; index < kFamilies.size(); ++index) {
    for (unsigned member : kFamilies[index]) {
      if (member == reg) return index;
    }
  }
  return std::nullopt;
}

bool is_64_bit_register(const cs_x86_op& operand) {
  return operand.type == X86_OP_REG && operand.size == 8 &&
         general_register_index(operand.reg).has_value();
}

class Disassembler {
 public:
  Disassembler() {
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &handle_) != CS_ERR_OK) {
      throw std::runtime_error("capstone cannot disassemble x86-64");
    }
    cs_option(handle_, CS_OPT_DETAIL, CS_OPT_ON);
    instruction_ = cs_malloc(handle_);
  }
  ~Disassembler() {
    cs_free(instruction_, 1);
    cs_close(&handle_);
  }
  Disassembler(const Disassembler&) = delete;
  Disassembler& operator=(const Disassembler&) = delete;

  // The one instruction at `address` whose bytes start `code`; nullptr if they do not decode.
  const cs_insn* decode(uint64_t address, std::string_view code) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(code.data());
    size_t size = code.size();
    if (!cs_disasm_iter(handle_, &bytes, &size, &address, instruction_)) return nullptr;
    return instruction_;
  }

  bool in_group(const cs_insn* instruction, unsigned group) const {
    return cs_insn_group(handle_, instruction, group);
  }

  std::vector<size_t> written_registers(const cs_insn* instruction) const {
    cs_regs read{}, written{};
    uint8_t read_count = 0, written_count = 0;
    std::vector<size_t> indexes;
    if (cs_regs_access(handle_, instruction, read, &read_count, written, &written_count) !=
        CS_ERR_OK) {
      // Unknown effects: assume every register changed.
      for (size_t index = 0; index < kGeneralRegisterCount; ++index) indexes.push_back(index);
      return indexes;
    }
    for (uint8_t i = 0; i < written_count; ++i) {
      if (auto index = general_register_index(written[i])) indexes.push_back(*index);
    }
    return indexes;
  }

 private:
  csh handle_ = 0;
  cs_insn* instruction_ = nullptr;
};

std::string hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

// What the file says about addresses: which lie inside the global, and what address the
// dynamic linker stores in each GOT slot.
struct AddressFacts {
  uint64_t global_address;
  uint64_t global_size;
  const std::unordered_map<uint64_t, uint64_t>& slot_targets;

  SymbolicValue classify(uint64_t address) const {
    if (address >= global_address && address - global_address < global_size) {
      return {Origin::kGlobalPointer, address - global_address};
    }
    return {Origin::kFileAddress, address};
  }

  // The address a memory operand designates, if it depends only on what we know.
  SymbolicValue effective_address(const cs_x86_op& operand, uint64_t next_address,
                                  const RegisterFile& registers) const {
    const x86_op_mem& memory = operand.mem;
    if (memory.index != X86_REG_INVALID || memory.segment != X86_REG_INVALID) return {};
    const uint64_t displacement = static_cast<uint64_t>(memory.disp);
    if (memory.base == X86_REG_RIP) return classify(next_address + displacement);
    std::optional<size_t> base = general_register_index(memory.base);
    if (!base) return {};
    const SymbolicValue& value = registers[*base];
    switch (value.origin) {
      case Origin::kArgumentPointer:
      case Origin::kGlobalPointer:
        return {value.origin, value.offset + displacement};
      case Origin::kFileAddress:
        return classify(value.offset + displacement);
      default:
        return {};
    }
  }

  // What an 8-byte load from `address` yields.
  SymbolicValue load_through(const SymbolicValue& address) const {
    switch (address.origin) {
      case Origin::kArgumentPointer:
        return {Origin::kArgumentField, address.offset};
      case Origin::kGlobalPointer:
        return {Origin::kGlobalField, address.offset};
      case Origin::kFileAddress:
        if (auto slot = slot_targets.find(address.offset); slot != slot_targets.end()) {
          return classify(slot->second);
        }
        return {};
      default:
        return {};
    }
  }
};

// Applies a `mov` or `lea` into a full 64-bit register; false for any other instruction,
// whose effect the caller must approximate.
bool track_move(const cs_x86& x86, unsigned instruction_id, uint64_t next_address,
                const AddressFacts& facts, RegisterFile& registers) {
  if (instruction_id != X86_INS_MOV && instruction_id != X86_INS_LEA) return false;
  if (x86.op_count != 2 || !is_64_bit_register(x86.operands[0])) return false;
  const cs_x86_op& source = x86.operands[1];
  SymbolicValue value;
  if (instruction_id == X86_INS_LEA && source.type == X86_OP_MEM) {
    value = facts.effective_address(source, next_address, registers);
  } else if (source.type == X86_OP_MEM && source.size == 8) {
    value = facts.load_through(facts.effective_address(source, next_address, registers));
  } else if (is_64_bit_register(source)) {
    value = registers[*general_register_index(source.reg)];
  }
  registers[*general_register_index(x86.operands[0].reg)] = value;
  return true;
}

}  // namespace

FieldAccessorDecoder::FieldAccessorDecoder(const ElfFile& elf, uint64_t global_address,
                                           uint64_t global_size)
    : global_address_(global_address), global_size_(global_size) {
  elf.for_each_section([&](const ElfSection& section) {
    const GElf_Shdr& header = section.header;
    if (header.sh_type == SHT_PROGBITS && (header.sh_flags & SHF_EXECINSTR)) {
      code_sections_.push_back({header.sh_addr, elf.section_bytes(section)});
      return;
    }
    if (header.sh_type != SHT_RELA || header.sh_entsize != sizeof(Elf64_Rela)) return;
    // Position-independent code reaches an exported global, or calls an exported function,
    // through a GOT slot, since another module could interpose the symbol; record the address
    // the dynamic linker will store in each slot (assuming no interposition).
    std::vector<GElf_Sym> symbols;
    if (header.sh_link != 0) {
      elf.for_each_symbol(elf.section_at(header.sh_link),
                          [&](const ElfSymbol& entry) { symbols.push_back(entry.symbol); });
    }
    const std::string_view bytes = elf.section_bytes(section);
    for (size_t at = 0; at + sizeof(Elf64_Rela) <= bytes.size(); at += sizeof(Elf64_Rela)) {
      Elf64_Rela relocation;
      std::memcpy(&relocation, bytes.data() + at, sizeof(relocation));
      const uint32_t type = ELF64_R_TYPE(relocation.r_info);
      const uint32_t symbol_index = ELF64_R_SYM(relocation.r_info);
      const bool names_defined_symbol =
          symbol_index < symbols.size() && symbols[symbol_index].st_shndx != SHN_UNDEF;
      switch (type) {
        case R_X86_64_RELATIVE:  // B + A
          slot_targets_[relocation.r_offset] = static_cast<uint64_t>(relocation.r_addend);
          break;
        case R_X86_64_GLOB_DAT:   // S
        case R_X86_64_JUMP_SLOT:  // S
          if (names_defined_symbol)
            slot_targets_[relocation.r_offset] = symbols[symbol_index].st_value;
          break;
        case R_X86_64_64:  // S + A
          if (names_defined_symbol) {
            slot_targets_[relocation.r_offset] =
                symbols[symbol_index].st_value + static_cast<uint64_t>(relocation.r_addend);
          }
          break;
        default:
          break;
      }
    }
  });
}

std::string_view FieldAccessorDecoder::code_at(uint64_t address) const {
  for (const CodeSection& section : code_sections_) {
    if (address >= section.address && address - section.address < section.bytes.size()) {
      return section.bytes.substr(address - section.address);
    }
  }
  return {};
}

std::optional<uint64_t> FieldAccessorDecoder::global_field_returned_by(uint64_t function_address,
                                                                       std::string* why_not) const {
  return field_returned_by(function_address, /*of_global=*/true, why_not);
}

std::optional<uint64_t> FieldAccessorDecoder::argument_field_returned_by(
    uint64_t function_address, std::string* why_not) const {
  return field_returned_by(function_address, /*of_global=*/false, why_not);
}

std::optional<uint64_t> FieldAccessorDecoder::field_returned_by(uint64_t function_address,
                                                                bool of_global,
                                                                std::string* why_not) const {
  const Origin wanted = of_global ? Origin::kGlobalField : Origin::kArgumentField;
  const AddressFacts facts{global_address_, global_size_, slot_targets_};
  Disassembler disassembler;
  struct Path {
    uint64_t address;
    RegisterFile registers;
  };
  RegisterFile at_entry{};
  at_entry[kRdi] = {Origin::kArgumentPointer, 0};
  std::vector<Path> pending = {{function_address, at_entry}};
  int paths_started = 0;
  int instructions_left = kInstructionBudget;
  std::set<uint64_t> returned_offsets;

  while (!pending.empty() && paths_started < kPathBudget) {
    Path path = pending.back();
    pending.pop_back();
    ++paths_started;
    while (instructions_left-- > 0) {
      const cs_insn* instruction = disassembler.decode(path.address, code_at(path.address));
      if (instruction == nullptr) break;  // not code we can read: this path tells nothing
      const cs_x86& x86 = instruction->detail->x86;
      const uint64_t next_address = instruction->address + instruction->size;

      if (disassembler.in_group(instruction, CS_GRP_RET)) {
        const SymbolicValue& result = path.registers[kRax];
        if (result.origin == wanted) returned_offsets.insert(result.offset);
        break;
      }
      if (disassembler.in_group(instruction, CS_GRP_JUMP)) {
        std::optional<uint64_t> target;
        if (x86.op_count == 1 && x86.operands[0].type == X86_OP_IMM) {
          target = static_cast<uint64_t>(x86.operands[0].imm);
        } else if (x86.op_count == 1 && x86.operands[0].type == X86_OP_MEM) {
          // A tail call through the PLT or a GOT slot (-fno-plt) to a function of this file.
          const SymbolicValue slot = facts.load_through(
              facts.effective_address(x86.operands[0], next_address, path.registers));
          if (slot.origin == Origin::kFileAddress) target = slot.offset;
        }
        if (target) pending.push_back({*target, path.registers});
        if (instruction->id == X86_INS_JMP) break;  // unconditional: this path goes on there
        path.address = next_address;                // conditional: both ways
        continue;
      }
      if (disassembler.in_group(instruction, CS_GRP_CALL)) {
        for (size_t index : kCallerSavedRegisters) path.registers[index] = {};
      } else if (!track_move(x86, instruction->id, next_address, facts, path.registers)) {
        for (size_t index : disassembler.written_registers(instruction)) path.registers[index] = {};
      }
      path.address = next_address;
    }
  }

  auto fail = [&](const std::string& reason) -> std::optional<uint64_t> {
    if (why_not) *why_not = "function at " + hex(function_address) + ": " + reason;
    return std::nullopt;
  };
  if (returned_offsets.size() == 1) return *returned_offsets.begin();
  if (returned_offsets.empty()) {
    return fail(of_global ? "no path returns a field of the global object"
                          : "no path returns a field of the object its first argument points at");
  }
  std::string offsets;
  for (uint64_t offset : returned_offsets) offsets += (offsets.empty() ? "" : ", ") + hex(offset);
  return fail("paths return different fields (" + offsets + ")");
}

}  // namespace tprof::symbolizer
