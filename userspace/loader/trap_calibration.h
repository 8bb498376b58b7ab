// What one uprobe trap costs on this kernel and hypervisor (issue 24's "measure the machine"):
// the cost of every op tprof records is about one trap at its entry and one at its `ret`, and
// it ranges from about 1 to 15 us between machines. Measured in tprof's own process, never the
// target's: empty BPF programs (bpf/probe_floor.bpf.c) on three functions of tprof's own, each
// called in a loop with and without its probe.
#pragma once

#include <cstdint>

namespace tprof {

struct TrapCosts {
  double emulated_entry_ns = 0;  // a probe on an instruction the kernel emulates (a `push`)
  double stepped_entry_ns = 0;   // one it single-steps out of line (a `mov`)
  double return_ns = 0;          // a `ret` (single-stepped), where tprof ends every range
  // An interrupt of the target's CPU, measured as a cpu-clock perf event's (a stack sample's,
  // its BPF program's run time apart): ~33 us on the idle 2-vCPU test VM, where an interrupt
  // leaves the guest; 4.2 us, and once 0 (under the noise), while the VM was busy.
  double interrupt_ns = 0;

  // What tprof's probes took of the target's time for `ranges` ranges, each entered at a
  // `push` (the usual first instruction of an op) and left at a `ret`.
  double estimate_ns(uint64_t ranges) const { return static_cast<double>(ranges) * (emulated_entry_ns + return_ns); }
  // What `entries`, `returns` and `stepped` traps (at instructions inside functions) took.
  double estimate_ns(uint64_t entries, uint64_t returns, uint64_t stepped) const {
    return static_cast<double>(entries) * emulated_entry_ns + static_cast<double>(returns) * return_ns +
           static_cast<double>(stepped) * stepped_entry_ns;
  }
  // What the stack sampler's interrupts took of a target that ran `target_cpu_ns` with the
  // sampler at `sample_hz` on its CPUs (0: no sampler).
  double sampling_ns(uint64_t target_cpu_ns, uint32_t sample_hz) const {
    return interrupt_ns * static_cast<double>(target_cpu_ns) * static_cast<double>(sample_hz) / 1e9;
  }
  // What the kernel counted of tprof's programs took: their traps, and their own run time.
  template <typename ProgramStatistics>
  double estimate_ns(const ProgramStatistics& programs) const {
    return estimate_ns(programs.entry_traps, programs.return_traps, programs.stepped_traps) +
           static_cast<double>(programs.run_time_ns);
  }
};

// Measures the three trap costs: the least of 3 rounds of `calls` calls each, less the same loop
// without the probe: 9 x `calls` traps (about 0.2 s where a single-stepped trap costs 13 us, as
// on the 2-vCPU test VM); and an interrupt's, from 3 rounds of a 20 ms loop sampled at 10 kHz.
// Throws tprof::Error when a probe cannot be placed.
TrapCosts calibrate_trap_costs(int calls = 2000);

}  // namespace tprof
