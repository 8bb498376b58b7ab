/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * torch's CPU allocations (--memory): c10::ProfiledCPUMemoryReporter::New(void* ptr, size_t
 * nbytes) and ::Delete(void* ptr), which DefaultCPUAllocator calls for every block whether a
 * profiler runs or not, and which torch's own profile_memory=True reports from. Entry probes
 * (or a branch right after the entry that leaves the arguments as they came: see
 * userspace/loader/memory_probes.h); the free's size comes from userspace's map of the
 * addresses allocated, so that nothing is kept here per block.
 */
#ifndef TPROF_BPF_MEMORY_PROBES_BPF_H
#define TPROF_BPF_MEMORY_PROBES_BPF_H

#include "op_record.h"
#include "python_walker.bpf.h"
#include "record_emitter.bpf.h"

struct memory_record {
	struct op_record head;
	struct memory_event memory;
};

static __always_inline int emit_memory_event(struct thread_ids ids, __u64 stack_id, __u64 address, __u64 bytes)
{
	struct memory_record *record = bpf_ringbuf_reserve(&op_records, sizeof(*record), 0);
	if (!record) {
		count_loss(ids.slot, LOSS_RING_BUFFER_FULL);
		return 0;
	}
	fill_head(&record->head, ids, 0, OP_RECORD_MEMORY, stack_id, bpf_ktime_get_ns(), SEQUENCE_COUNTER_UNKNOWN);
	record->memory.address = address;
	record->memory.bytes = bytes;
	bpf_ringbuf_submit(record, BPF_RB_NO_WAKEUP);
	return 0;
}

/* New(this, ptr, nbytes): torch reports nothing of an empty block, nor does tprof. The
 * allocating thread's Python stack says who holds the block. */
SEC("uprobe.multi")
int memory_allocated(struct pt_regs *ctx)
{
	__u64 address = PT_REGS_PARM2(ctx);
	__u64 bytes = PT_REGS_PARM3(ctx);
	if (!address || !bytes)
		return 0;
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	return emit_memory_event(ids, capture_python_stack(target, ids), address, bytes);
}

/* Delete(this, ptr). */
SEC("uprobe.multi")
int memory_freed(struct pt_regs *ctx)
{
	__u64 address = PT_REGS_PARM2(ctx);
	if (!address)
		return 0;
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	return emit_memory_event(ids, 0, address, 0);
}

#endif /* TPROF_BPF_MEMORY_PROBES_BPF_H */
