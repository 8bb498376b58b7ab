/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The record ABI shared by the BPF op tracer and the userspace consumer.
 * Included by BPF C (after vmlinux.h, which defines the __uN types) and by C++ (which takes
 * them from <linux/types.h>).
 */
#ifndef TPROF_BPF_OP_RECORD_H
#define TPROF_BPF_OP_RECORD_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum op_record_kind {
	OP_RECORD_ENTER = 1,
	OP_RECORD_EXIT = 2,
	OP_RECORD_PYTHON_SAMPLE = 3, /* the sampler's look at a thread between ops; op_id unused */
};

/* One op entry or exit, or one stack sample. 32 bytes; the ring buffer adds an 8-byte header. */
struct op_record {
	__u64 timestamp_ns;    /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 python_stack_id; /* key in the python_stacks map; 0: none captured */
	__u32 tid;             /* thread id in tprof's PID namespace (the target's, for a sidecar) */
	__u32 op_id;           /* index into the userspace op table, from the attach cookie */
	__u8 kind;             /* enum op_record_kind */
	__u8 reserved[7];
};

/* Slots of the per-CPU `loss_counters` array: what could not be recorded, and why. */
enum loss_counter {
	LOSS_RING_BUFFER_FULL = 0,   /* a record was dropped */
	LOSS_STACK_UNREADABLE = 1,   /* a Python stack could not be walked (no thread state found) */
	LOSS_STACK_NOT_STORED = 2,   /* a walked stack could not be stored in python_stacks */
	LOSS_COUNTER_COUNT = 3,
};

#endif /* TPROF_BPF_OP_RECORD_H */
