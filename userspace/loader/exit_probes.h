// Where the op tracer's ranges end (bpf/open_ranges.bpf.h): the `ret` instructions of every
// probed function of libtorch_cpu (ops, Engine::evaluate_function, Node::apply overrides),
// found by disassembly at attach, and the C++ runtime's __cxa_begin_catch, where ranges that
// an exception unwound are closed. No uretprobe: an exception thrown through a uretprobed
// frame aborts the target.
#pragma once

#include <cstdint>
#include <vector>

#include "symbolizer/binary/library_index.h"
#include "userspace/session/target_process.h"
#include "userspace/loader/uprobe_multi.h"

namespace tprof {

struct ExitProbes {
  UprobeSites returns;  // in libtorch_cpu, each offset once
  // __cxa_begin_catch in the target's libstdc++; no offsets when none. It also closes the ranges
  // of functions without a `ret` (ones that only throw).
  UprobeSites catches;
};

// `function_addresses` are link-time addresses in `torch`'s library. Throws std::runtime_error
// when the library has no unwind table to find function bounds in.
ExitProbes plan_exit_probes(const MappedLibrary& torch, const symbolizer::LibraryIndex& index,
                            const std::vector<uint64_t>& function_addresses, const TargetProcess& target);

}  // namespace tprof
