// What bpf/load_hold.bpf.c and tprof agree on: the signals a hold may use.
#pragma once

// SIGURG, then SIGWINCH: both are ignored by default, and a process rarely handles them.
#define LOAD_HOLD_SIGNAL 23
#define LOAD_HOLD_FALLBACK_SIGNAL 28
#define LOAD_HOLD_SIG_DFL 0UL
#define LOAD_HOLD_SIG_IGN 1UL

// Where a hold was asked for, kept beside the signal in the request (bits 8 and up), so that a
// process probed at both tells a dlopen from CUDA's call into the injection library.
#define LOAD_HOLD_AT_LOADER 1
#define LOAD_HOLD_AT_INJECTION 2
#define LOAD_HOLD_SITE_SHIFT 8

// <link.h>'s r_debug: r_state (RT_CONSISTENT, RT_ADD, RT_DELETE) follows r_version (padded),
// r_map and r_brk.
#define LOAD_HOLD_R_STATE_OFFSET 24
#define LOAD_HOLD_RT_CONSISTENT 0
