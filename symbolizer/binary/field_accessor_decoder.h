// Reads field offsets out of tiny exported accessor functions (x86-64 machine code), so that
// offsets we would otherwise copy from headers come from the very binary in use. It follows
// what each instruction does to the registers, from the function's entry to every `ret`:
//
//   PyInterpreterState_Head:       return _PyRuntime.interpreters.head;  -> global field
//   PyInterpreterState_ThreadHead: return interp->threads.head;          -> argument field
//
// Understood: endbr64/nop, register moves, lea, 8-byte loads through a base register or
// RIP-relative (directly into the global, or through a GOT slot the dynamic linker fills with
// its address), conditional branches (both ways are followed: a NULL test returns NULL on one
// path and loads on the other) and tail calls (direct jumps, and jumps through the PLT or a
// GOT slot to a function of the same file). Anything else makes the registers it writes
// unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/relocations.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

class FieldAccessorDecoder {
 public:
  // `global_address`/`global_size`: where the global object whose fields we look for (for
  // CPython, _PyRuntime) lies, in the ELF's own address space (st_value, st_size). Reads
  // the file's sections and relocations; `elf` must outlive the decoder.
  FieldAccessorDecoder(const ElfFile& elf, uint64_t global_address, uint64_t global_size);

  // X such that the function at `function_address` returns the 8-byte field at global + X.
  std::optional<uint64_t> global_field_returned_by(uint64_t function_address,
                                                   std::string* why_not) const;

  // X such that the function at `function_address` returns the 8-byte field at X bytes
  // into the object its first argument (rdi) points at.
  std::optional<uint64_t> argument_field_returned_by(uint64_t function_address,
                                                     std::string* why_not) const;

 private:
  // `of_global`: a field of the global, else of the object the first argument points at.
  std::optional<uint64_t> field_returned_by(uint64_t function_address, bool of_global,
                                            std::string* why_not) const;

  SectionMap sections_;
  // What the dynamic linker stores in GOT slots: the global's address, or a function's.
  Relocations relocations_;
  uint64_t global_address_;
  uint64_t global_size_;
};

}  // namespace tprof::symbolizer
