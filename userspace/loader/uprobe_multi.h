// Attaching one BPF program to many uprobe sites through a single uprobe_multi link
// (Linux >= 6.6, libbpf >= 1.3). One link per program costs one syscall for thousands of
// sites, where classic per-probe uprobes cost one perf event each.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct bpf_link;
struct bpf_program;

namespace tprof {

struct BpfLinkDeleter {
  void operator()(bpf_link* link) const;
};
using BpfLink = std::unique_ptr<bpf_link, BpfLinkDeleter>;

struct UprobeSites {
  std::string binary_path;              // host-visible path (may be under /proc/PID/root)
  std::vector<unsigned long> offsets;   // file offsets of the probed instructions
  std::vector<uint64_t> cookies;        // bpf_get_attach_cookie() value of each site
};

// uprobe_multi links arrived in Linux 6.6. `release` is uname -r: "6.18.44-fc-v769".
bool kernel_release_has_uprobe_multi(const char* release);

// Throws tprof::Error with a one-line reason when the running kernel has no uprobe_multi.
void require_uprobe_multi_kernel();

// `offsets` with each site whose first instruction is endbr64 moved past it. x86 uprobes
// emulate push, jmp/jcc and call but single-step any other instruction out of line, a second
// trap: on this VM, empty programs on the entries and returns of torch 2.6's ops (a CET build:
// every function begins with endbr64) cost +4,300 us per step of the test loop with the
// probes on the endbr64, +279 us on the push after it (docs/BENCHMARKS.md). endbr64 changes
// no register and not the stack, so the probe sees the arguments and rsp as at entry.
std::vector<unsigned long> past_leading_endbr64(const std::string& binary_path,
                                                const std::vector<unsigned long>& offsets);

// Attaches `program` to every site (past a leading endbr64), for the threads of `pid` only.
// Entry-style probes only: tprof places no uretprobe, since a C++ exception thrown through a
// uretprobed frame aborts the target (userspace/loader/exit_probes.h). Throws tprof::Error.
BpfLink attach_uprobe_multi(const bpf_program* program, pid_t pid, const UprobeSites& sites);

}  // namespace tprof
