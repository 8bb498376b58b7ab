// Where to probe libtorch_cpu to see user annotations: Python's
// torch.autograd.profiler.record_function("name") (also what torch.optim's
// "Optimizer.step#SGD.step" uses) calls a profiler-op kernel even when no profiler runs; the
// kernel constructs an at::RecordFunction(RecordScope::USER_SCOPE) and leaving the block calls
// RecordFunction::end() on that same object.
//
// The kernels: record_function_enter_new (exported; what torch 2.x's Python calls) and
// record_function_enter_legacy behind torch.ops.profiler._record_function_enter (what 1.13's
// Python calls), a static function that .dynsym does not name. Both are found the same way:
// functions that call RecordFunction(RecordScope) with USER_SCOPE (7) in esi, then hand their
// second argument (the name) on to record_function_enter(name, args, rec), and are not some
// other exported function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "symbolizer/binary/library_index.h"

namespace tprof::symbolizer {

struct RecordFunctionSites {
  // File offsets of the kernels, sorted. At entry rdi is where the returned handle goes
  // (sret), rsi the `const std::string& name`, rdx the `const optional<std::string>& args`.
  std::vector<uint64_t> enter_functions;
  // File offset of at::RecordFunction::RecordFunction(at::RecordScope): rdi = this, esi = the
  // scope (7 = USER_SCOPE; RecordFunctions of other scopes are constructed here too). 0 if not
  // exported.
  uint64_t user_scope_constructor = 0;
  // File offset of a probe on at::RecordFunction::end(): rdi = this, the constructed object.
  // Leaving the block calls it, and ~RecordFunction calls it again (a no-op then), so the first
  // call after the constructor ends the range. Every other RecordFunction ends here too, so the
  // probe sits on the conditional jump after its isActive() test, which the kernel emulates,
  // rather than on its entry. 0 if not exported.
  uint64_t end = 0;
  std::string source;  // one line: what was kept and what was left out, and why
};

// Throws std::runtime_error (one line) when the library has no unwind table to find function
// starts in.
RecordFunctionSites find_record_function_sites(const LibraryIndex& libtorch_cpu);

}  // namespace tprof::symbolizer
