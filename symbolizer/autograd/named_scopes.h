// C++ ranges torch's profiler shows that are not ATen ops: code that opens a RecordFunction
// with RECORD_FUNCTION("detach", inputs) (torch's autograd detach and detach_, the JIT's
// forward, DDP's reducer steps...). The name reaches the RecordFunction only through
// RecordFunction::before(const char*, ...), which runs while a profiler is active, so tprof
// cannot read it at run time; but the name is a string literal that the calling function loads
// right before that call (`lea name(%rip),%rsi`). Each function that calls before() with one
// literal is a range of that name from its entry to its return, probed like an op.
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
};

// Throws std::runtime_error (one line) when the library has no unwind table to find function
// starts in.
NamedScopes find_named_scopes(const LibraryIndex& libtorch_cpu);

}  // namespace tprof::symbolizer
