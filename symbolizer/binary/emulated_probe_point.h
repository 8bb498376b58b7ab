// Where on a function to put a uprobe so that the kernel emulates the probed instruction.
//
// x86 uprobes emulate a few instructions (push, jmp/jcc/call rel) in the trap handler; any
// other one is single-stepped out of line, a second trap. In this VM (A/B runs on the test
// loop, docs/BENCHMARKS.md) a probe on the entry of RecordFunction::end(), which begins
// `cmpb $0,0x68(%rdi)`, cost ~850 us per training step; on the `je` right after it, where the
// arguments are still as at entry, the whole annotation probe set costs a small part of that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

// The link-time address of the first conditional jump among the first few instructions of the
// function at `function_address`, if none before it writes the general register
// `kept_register` (x86_disassembler.h numbering) or branches; else `function_address` itself.
uint64_t conditional_jump_probe_address(const SectionMap& sections, uint64_t function_address,
                                        size_t kept_register);

// Where to probe a function whose arguments in `kept_registers` the probe reads: its entry when
// the first instruction past a leading endbr64 (which uprobe_multi.h skips) is a `push` the
// kernel emulates; else the first `push` or conditional jump among its first eight instructions
// when nothing before it writes those registers, jumps, calls or returns (GCC 16 opens some
// functions with `sub $N,%rsp` and a stack-protector load before testing an argument, or with a
// load of a global before its pushes); else the entry.
uint64_t emulated_entry_probe_address(const SectionMap& sections, uint64_t function_address,
                                      std::initializer_list<size_t> kept_registers);

// emulated_entry_probe_address for code that may loop within its first instructions (inductor's
// kernels: `xor; movss; addss; ...; jne` is a whole loop): the place it picks only when no direct
// jump of the function [function_address, function_end) lands past the entry and at or before
// it, where a loop would run the probe again or a join skip it, and the function has no
// indirect jump; else the entry.
uint64_t emulated_entry_probe_address_run_once(const SectionMap& sections, uint64_t function_address,
                                               uint64_t function_end, std::initializer_list<size_t> kept_registers);

}  // namespace tprof::symbolizer
