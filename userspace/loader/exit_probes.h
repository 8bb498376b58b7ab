// Where the op tracer's ranges end (bpf/open_ranges.bpf.h): the `ret` instructions of every
// probed function of libtorch_cpu (ops, Engine::evaluate_function, Node::apply overrides),
// found by disassembly at attach, and the C++ runtime's __cxa_begin_catch, where ranges that
// an exception unwound are closed. No uretprobe: an exception thrown through a uretprobed
// frame aborts the target.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
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

// The `ret`s of some functions, each with the function it belongs to: a `ret` several
// functions share (merged tails) is listed once for each, so that the returns of a subset of
// the functions can be probed alone (--ops, --skip-ops).
struct ReturnSites {
  std::vector<uint64_t> offsets;    // file offsets
  std::vector<uint32_t> functions;  // the index of each one's function in the planned list
};

// The `ret`s of `function_addresses` (link-time addresses in the library `index` describes):
// the same for every process that maps the library. Throws std::runtime_error when the library
// has no unwind table to find function bounds in.
ReturnSites plan_return_sites(const symbolizer::LibraryIndex& index, const std::vector<uint64_t>& function_addresses);

// The exit programs' sites at `offsets` (file offsets in the binary at `binary_path`).
UprobeSites exit_sites(const std::string& binary_path, const std::vector<uint64_t>& offsets);

// The offsets of the returns of the functions `probed` accepts (by index), each once.
std::vector<uint64_t> probed_return_offsets(const ReturnSites& returns, const std::function<bool(uint32_t)>& probed);

// The exits of one target: the `ret`s at `return_offsets` in its libtorch_cpu at
// `torch_host_path`, and __cxa_begin_catch in the libstdc++ it maps.
ExitProbes plan_exit_probes(const std::string& torch_host_path, const std::vector<uint64_t>& return_offsets,
                            const TargetProcess& target);

}  // namespace tprof
