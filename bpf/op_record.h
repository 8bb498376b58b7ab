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
};

/* One op entry or exit, as the uprobe saw it. 24 bytes; the ring buffer adds an 8-byte header. */
struct op_record {
	__u64 timestamp_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u32 tid;          /* kernel thread id (gettid() in the target) */
	__u32 op_id;        /* index into the userspace op table, from the attach cookie */
	__u8 kind;          /* enum op_record_kind */
	__u8 reserved[7];
};

/* Index of the one slot in the per-CPU `dropped_records` array. */
#define DROPPED_RECORDS_SLOT 0

#endif /* TPROF_BPF_OP_RECORD_H */
