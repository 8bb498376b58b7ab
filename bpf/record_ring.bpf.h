/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The op tracer's ring buffer: every record (op_record.h) goes through it, those of the
 * probes (record_emitter.bpf.h) and the stacks the Python walker stores for the first time.
 */
#ifndef TPROF_BPF_RECORD_RING_BPF_H
#define TPROF_BPF_RECORD_RING_BPF_H

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by userspace before load */
} op_records SEC(".maps");

#endif /* TPROF_BPF_RECORD_RING_BPF_H */
