/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Python stack ABI shared by the BPF frame walker and userspace: how userspace tells the
 * walker where the interpreter keeps things, and the stacks the walker hands back.
 */
#ifndef TPROF_BPF_PYTHON_STACK_H
#define TPROF_BPF_PYTHON_STACK_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define PYTHON_STACK_MAX_FRAMES 128
/* Enough for the largest frame prefix read (3.9's PyFrameObject up to f_localsplus[0]). */
#define PYTHON_FRAME_READ_MAX 384
/* Enough for the largest thread-state prefix read (up to thread_id/current_frame). */
#define PYTHON_TSTATE_READ_MAX 256
/* Thread states examined when looking for the current thread's. */
#define PYTHON_MAX_THREAD_STATES 1024

enum python_instruction_encoding {
	PYTHON_INSTRUCTION_LASTI_BYTES = 0,       /* 3.9: int f_lasti, byte offset */
	PYTHON_INSTRUCTION_LASTI_CODE_UNITS = 1,  /* 3.10: int f_lasti, code-unit index */
	PYTHON_INSTRUCTION_POINTER = 2,           /* 3.11+: pointer into code + co_code_adaptive */
};

/* One per target, in its settings (target_settings.h): targets may run different Pythons. */
struct python_walker_config {
	__u64 runtime_address;
	__u64 executable_tag_mask;
	__u32 enabled;
	__u32 runtime_interpreters_head;
	__u32 interpreter_threads_head;
	__u32 thread_next;
	__u32 thread_thread_id;
	__u32 thread_frame;
	__s32 cframe_current_frame; /* -1: thread_frame points at the frame itself */
	__u32 frame_code;
	__u32 frame_previous;
	__u32 frame_instruction;
	__u32 instruction_encoding; /* enum python_instruction_encoding */
	__s32 frame_owner;          /* -1: no owner field */
	__s32 frame_owner_skip_a;   /* owner values of frames that are not Python code, or -1 */
	__s32 frame_owner_skip_b;
	__u32 frame_localsplus;
	__u32 frame_read_size;      /* bytes of each frame read at once: covers every field above */
	__u32 tstate_read_size;     /* likewise for the thread state */
	__s32 code_adaptive;        /* 3.11+: co_code_adaptive; -1 before */
};

/* One frame, as the walker saw it. Userspace validates `code` before trusting it. */
struct python_frame {
	__u64 frame;       /* frame address: tells one invocation from the next */
	__u64 code;        /* code object */
	__u64 first_local; /* f_localsplus[0]: `self` of a method (names nn.Module calls) */
	__u32 instruction; /* bytes (3.9) or code units (3.10+) from the start of the bytecode */
	__u32 reserved;
};

/* A whole stack, innermost frame first. Stored once per distinct content, keyed by its hash. */
struct python_stack {
	__u32 depth;
	__u32 truncated; /* more than PYTHON_STACK_MAX_FRAMES frames */
	struct python_frame frames[PYTHON_STACK_MAX_FRAMES];
};

#endif /* TPROF_BPF_PYTHON_STACK_H */
