#include "userspace/loader/trap_calibration.h"

#include <link.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <limits>
#include <memory>
#include <string>

#include "probe_floor.skel.h"
#include "userspace/cli/error.h"
#include "userspace/loader/libbpf_messages.h"
#include "userspace/loader/unique_fd.h"
#include "userspace/loader/uprobe_multi.h"

// Three functions whose instructions are known, so that each probe lands on the kind of
// instruction it is meant to measure: the compiler would choose its own.
asm(R"(
    .text
    .globl tprof_trap_push
    .type tprof_trap_push, @function
tprof_trap_push:
    push %rbp
    pop %rbp
    ret
    .size tprof_trap_push, .-tprof_trap_push
    .globl tprof_trap_mov
    .type tprof_trap_mov, @function
tprof_trap_mov:
    mov %rdi, %rax
    ret
    .size tprof_trap_mov, .-tprof_trap_mov
)");

extern "C" void tprof_trap_push();
extern "C" void tprof_trap_mov();

namespace tprof {
namespace {

constexpr int kRounds = 3;
constexpr uintptr_t kPushLength = 1, kPopLength = 1;  // push %rbp; pop %rbp: one byte each

struct SkeletonDeleter {
  void operator()(probe_floor* skeleton) const { probe_floor__destroy(skeleton); }
};

// The calling thread's CPU time, which the kernel's handling of its traps counts in and time on
// other threads does not: the calibration thread is SCHED_IDLE, and on a busy machine every
// round of it was preempted, a wall-clock round then reading 2.7 ms a trap instead of 10 us.
uint64_t now_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

// The least CPU time per call of `function` over kRounds rounds: the rounds least disturbed
// (cache misses after a switch). Called through a volatile pointer, so that every call is made.
double ns_per_call(void (*function)(), int calls) {
  void (*volatile call)() = function;
  double best = std::numeric_limits<double>::max();
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t start = now_ns();
    for (int i = 0; i < calls; ++i) call();
    best = std::min(best, static_cast<double>(now_ns() - start) / calls);
  }
  return best;
}

// The offset in tprof's executable file of the code at `address`.
unsigned long file_offset_of(const void* address) {
  struct Search {
    uintptr_t address;
    unsigned long offset = 0;
    bool found = false;
  } search{reinterpret_cast<uintptr_t>(address)};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* search = static_cast<Search*>(data);
        if (info->dlpi_name != nullptr && info->dlpi_name[0] != '\0') return 0;  // the executable is ""
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& segment = info->dlpi_phdr[i];
          const uintptr_t start = info->dlpi_addr + segment.p_vaddr;
          if (segment.p_type != PT_LOAD || search->address < start || search->address >= start + segment.p_memsz)
            continue;
          search->offset = search->address - start + segment.p_offset;
          search->found = true;
          return 1;
        }
        return 0;
      },
      &search);
  if (!search.found) throw Error("cannot find tprof's own code to calibrate the trap cost");
  return search.offset;
}

// The cost of a trap at `offset` in tprof's executable, taken each call of `function`.
double trap_ns(const bpf_program* program, unsigned long offset, void (*function)(), int calls) {
  const double bare = ns_per_call(function, calls);
  UprobeSites site{.binary_path = "/proc/self/exe", .offsets = {offset}, .cookies = {0}};
  const BpfLink link = attach_uprobe_multi(program, ::getpid(), site);
  return std::max(0.0, ns_per_call(function, calls) - bare);
}

// `iterations` additions: the same work at every call.
void spin(uint64_t iterations) {
  volatile uint64_t sink = 0;
  for (uint64_t i = 0; i < iterations; ++i) sink = sink + i;
}

// The least CPU time of kRounds runs of spin(iterations).
double ns_of_spin(uint64_t iterations) {
  double best = std::numeric_limits<double>::max();
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t start = now_ns();
    spin(iterations);
    best = std::min(best, static_cast<double>(now_ns() - start));
  }
  return best;
}

// What one interrupt of a cpu-clock perf event costs the thread it lands on (the kernel counts
// it in that thread's CPU time: no IRQ time accounting on the kernels this was measured on; where
// there is, the estimate is low by the interrupt's own time). Sampled at kSampleHz, with an empty
// program.
double interrupt_ns(const bpf_program* program) {
  constexpr uint64_t kSampleHz = 10'000;
  constexpr double kLoopNs = 20e6;
  uint64_t iterations = 1'000'000;
  const double calibration = ns_of_spin(iterations);
  iterations = static_cast<uint64_t>(static_cast<double>(iterations) * kLoopNs / std::max(calibration, 1.0));
  const double bare = ns_of_spin(iterations);
  perf_event_attr attributes{};
  attributes.size = sizeof(attributes);
  attributes.type = PERF_TYPE_SOFTWARE;
  attributes.config = PERF_COUNT_SW_CPU_CLOCK;
  attributes.sample_period = 1'000'000'000 / kSampleHz;
  const UniqueFd event(static_cast<int>(::syscall(SYS_perf_event_open, &attributes, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)));
  if (!event) throw Error(errno_message("cannot open a perf event to calibrate the sampler's cost", errno));
  const BpfLink link(bpf_program__attach_perf_event(program, event.get()));
  if (!link) throw Error(errno_message("cannot attach to a perf event to calibrate the sampler's cost", errno));
  const double sampled = ns_of_spin(iterations);
  const double samples = sampled * static_cast<double>(kSampleHz) / 1e9;
  return std::max(0.0, (sampled - bare) / samples);
}

}  // namespace

TrapCosts calibrate_trap_costs(int calls) {
  route_libbpf_messages();
  std::unique_ptr<probe_floor, SkeletonDeleter> skeleton(probe_floor__open_and_load());
  if (!skeleton)
    throw Error(with_libbpf_messages(errno_message("cannot load the trap-calibration BPF programs", errno)));
  const unsigned long push = file_offset_of(reinterpret_cast<const void*>(&tprof_trap_push));
  const unsigned long mov = file_offset_of(reinterpret_cast<const void*>(&tprof_trap_mov));
  TrapCosts costs;
  costs.emulated_entry_ns = trap_ns(skeleton->progs.op_enter, push, tprof_trap_push, calls);
  costs.stepped_entry_ns = trap_ns(skeleton->progs.op_enter, mov, tprof_trap_mov, calls);
  costs.return_ns = trap_ns(skeleton->progs.op_return, push + kPushLength + kPopLength, tprof_trap_push, calls);
  costs.interrupt_ns = interrupt_ns(skeleton->progs.sample);
  return costs;
}

}  // namespace tprof
