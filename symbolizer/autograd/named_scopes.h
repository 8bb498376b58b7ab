// C++ ranges torch's profiler shows that are not ATen ops: code that opens a RecordFunction
// with RECORD_FUNCTION("detach", inputs) (torch's autograd detach and detach_, the JIT's
// forward, DDP's reducer steps...). The name reaches the RecordFunction only through
// RecordFunction::before, which runs while a profiler is active, so tprof cannot read it at run
// time; but the name is a string literal that the calling function passes right before that
// call. Torch 1.13 and 2.6 take it as before(const char*, long), in rsi (`lea name(%rip),%rsi`);
// torch 2.14 as before(std::variant<std::string_view, reference_wrapper<const FunctionSchema>>,
// long), a string_view inside a variant passed on the stack: length at (%rsp), the literal's
// address at 8(%rsp), built in a frame temporary and copied there through xmm0 (`movq
// $6,-0x1c0(%rbp)`, `lea detach(%rip),%rax`, `mov %rax,-0x1b8(%rbp)`, `movdqa
// -0x1c0(%rbp),%xmm0`, `movups %xmm0,(%rsp)`), mostly in a call of a local copy of the
// template before(fn, inputs, seq), which tail-jumps to before(). Each function that calls
// before() with one literal is a range of that name from its entry to its return, probed like
// an op.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "symbolizer/binary/library_index.h"

namespace tprof::symbolizer {

struct NamedScope {
  uint64_t function_address = 0;  // link-time address of the function that opens it
  std::string name;               // "detach"
};

struct NamedScopes {
  std::vector<NamedScope> scopes;  // by function address
  std::string source;              // one line: how many were found, and which were left out
  std::string why_none;            // when `scopes` is empty, one line saying why (for a warning)
};

// Throws std::runtime_error (one line) when the library has no unwind table to find function
// starts in.
NamedScopes find_named_scopes(const LibraryIndex& libtorch_cpu);

}  // namespace tprof::symbolizer
