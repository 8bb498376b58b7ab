// Follows a small C++ member function (x86-64 machine code) from its entry to each `ret`, and
// says what it did with the object `this` (rdi) points at on the way: which fields it returned
// (in rax, and rdx for a 16-byte result such as an ArrayRef), which address inside the object
// it returned, which fields it compared with zero and which it set to zero.
//
//   TensorImpl::sizes_custom:  mov 0x48(%rdi),%rdx; cmp $5,%rdx; ja ...; lea 0x50(%rdi),%rax; ret
//     -> rax = this + 0x50, rdx = the 8-byte field at 0x48
//   TensorImpl::device_custom: cmpb $0,0xb2(%rdi); je ...; movzwl 0xb3(%rdi),%eax; ret
//     -> rax = the 2-byte field at 0xb3, compared with zero: the byte at 0xb2
//
// Only paths that call nothing are reported. The default path of such an accessor makes no
// call; calls lead to Python dispatch, symbolic shapes or an error, and a call to a function
// that does not return (torchCheckFail) cannot be told from one that does. Conditional branches
// are followed both ways, direct jumps are followed, indirect jumps (tail calls through a
// vtable) end the path. Understood: register moves and loads (any width), lea, add/sub of an
// immediate, cmp/test against zero and stores of zero; anything else makes the registers it
// writes unknown.
#pragma once

#include <cstdint>
#include <vector>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

struct TracedValue {
  enum class Kind {
    kUnknown,
    kThisAddress,  // this + offset
    kThisField,    // the `width` bytes loaded from this + offset
  };
  Kind kind = Kind::kUnknown;
  uint64_t offset = 0;
  unsigned width = 0;
};

struct FieldTouch {
  uint64_t offset = 0;  // bytes into *this
  unsigned width = 0;   // bytes
};

struct ReturningPath {
  TracedValue rax;
  TracedValue rdx;
  std::vector<FieldTouch> compared_with_zero;
  std::vector<FieldTouch> set_to_zero;
};

class MemberFunctionTracer {
 public:
  // Reads the file's section headers; `elf` must outlive the tracer.
  explicit MemberFunctionTracer(const ElfFile& elf) : sections_(elf) {}

  // Every call-free path from the function at `function_address` (an address in the ELF's
  // own address space) to a `ret`; empty if there is none or the code cannot be read.
  std::vector<ReturningPath> returning_paths(uint64_t function_address) const;

 private:
  SectionMap sections_;
};

}  // namespace tprof::symbolizer
