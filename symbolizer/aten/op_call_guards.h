// Which ops a process has ever called, read from its memory without a probe. Each generated
// at::_ops::<op>::call looks its operator up once, in a function-local static
// (`static auto op = create_<op>_typed_handle();`), whose Itanium-ABI guard byte turns non-zero
// when that first call has set it up. GCC tests the guard at the function's start with a
// byte load of it (`movzbl guard(%rip)` or `cmpb $0, guard(%rip)`), and passes the same address
// to __cxa_guard_acquire (`lea guard(%rip), %rdi`): the guard is the byte both refer to.
//
// --max-overhead links only the called ops' probes: a training loop calls a few hundred of
// libtorch's thousands of ops, and each site costs tprof's CPU to put in and take out.
#pragma once

#include <cstdint>
#include <vector>

#include "symbolizer/binary/process_memory.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

// The guard of each op function at `op_addresses` (link-time), found in its first
// instructions; 0 where none was found.
std::vector<uint64_t> find_op_call_guards(const SectionMap& sections, const std::vector<uint64_t>& op_addresses);

// By op, whether the process behind `memory` has called it: its guard, at `load_address` +
// the link-time address, is set. An op with no guard found counts as called, and so does
// every op when the guards cannot be read (then it is said in `unreadable`).
std::vector<bool> read_called_ops(const ProcessMemory& memory, uint64_t load_address,
                                  const std::vector<uint64_t>& guards, bool* unreadable = nullptr);

}  // namespace tprof::symbolizer
