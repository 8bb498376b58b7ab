// Where ops called from Python through the boxed dispatcher (torch.ops.<ns>.<op>.<overload>)
// pass, in libtorch_python: torch::jit::invokeOperatorFromPython(operators, args, kwargs,
// dispatch key), which finds the overload the arguments fit and calls it boxed. Those calls
// never pass at::_ops::<op>::call (bpf/boxed_operators.bpf.h).
// - torch 1.13 and 2.6: the exported function itself; rsi is the operators' std::vector.
// - torch 2.14 (GCC 16): the exported function is a thunk that unpacks the vector and calls a
//   local copy of the body, which the library's other callers call directly: rsi is the
//   vector's begin, rdx its size. The copy is found from the thunk's one call.
#pragma once

#include <cstdint>
#include <optional>

#include "symbolizer/binary/library_index.h"

namespace tprof::symbolizer {

struct BoxedCallSite {
  enum class Operators : uint32_t {
    kVector = 0,  // bpf/boxed_operators.bpf.h BOXED_OPERATORS_VECTOR
    kSpan = 1,    // BOXED_OPERATORS_SPAN
  };
  uint64_t address = 0;  // link-time address of the function's entry
  Operators operators = Operators::kVector;
};

// The site in the library `index` describes, or none when it defines no
// invokeOperatorFromPython (or a thunk whose call cannot be followed).
std::optional<BoxedCallSite> find_boxed_call_site(const LibraryIndex& index);

}  // namespace tprof::symbolizer
