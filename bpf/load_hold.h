// What bpf/load_hold.bpf.c and tprof agree on: the signals a hold may use.
#pragma once

// SIGURG, then SIGWINCH: both are ignored by default, and a process rarely handles them.
#define LOAD_HOLD_SIGNAL 23
#define LOAD_HOLD_FALLBACK_SIGNAL 28
#define LOAD_HOLD_SIG_DFL 0UL
#define LOAD_HOLD_SIG_IGN 1UL
