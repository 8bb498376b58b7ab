/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * torch's allocations (--memory). The CPU's: c10::ProfiledCPUMemoryReporter::New(void* ptr,
 * size_t nbytes) and ::Delete(void* ptr), which DefaultCPUAllocator calls for every block whether
 * a profiler runs or not, and which torch's own profile_memory=True reports from; a free's size
 * comes from userspace's map of the addresses allocated, so that nothing is kept here per block.
 * A device's: c10::reportMemoryUsageToProfiler(void* ptr, int64_t alloc_size, size_t
 * total_allocated, size_t total_reserved, c10::Device device), which the CUDA caching allocator
 * calls at every malloc and free (it returns at once when no profiler listens). Entry probes, or
 * a branch right after the entry that leaves the arguments as they came (see
 * userspace/loader/memory_probes.h).
 */
#ifndef TPROF_BPF_MEMORY_PROBES_BPF_H
#define TPROF_BPF_MEMORY_PROBES_BPF_H

#include "op_record.h"
#include "python_walker.bpf.h"
#include "record_emitter.bpf.h"

#define DEVICE_TYPE_CPU 0

struct memory_record {
	struct op_record head;
	struct memory_event memory;
};

static __always_inline int emit_memory_event(struct thread_ids ids, __u64 stack_id, const struct memory_event *event)
{
	struct memory_record *record = bpf_ringbuf_reserve(&op_records, sizeof(*record), 0);
	if (!record) {
		count_loss(ids.slot, LOSS_RING_BUFFER_FULL);
		return 0;
	}
	fill_head(&record->head, ids, 0, OP_RECORD_MEMORY, stack_id, bpf_ktime_get_ns(), SEQUENCE_COUNTER_UNKNOWN);
	record->memory = *event;
	bpf_ringbuf_submit(record, BPF_RB_NO_WAKEUP);
	return 0;
}

/* New(this, ptr, nbytes): torch reports nothing of an empty block, nor does tprof. The
 * allocating thread's Python stack says who holds the block. */
SEC("uprobe.multi")
int memory_allocated(struct pt_regs *ctx)
{
	struct memory_event event = {.address = PT_REGS_PARM2(ctx), .bytes = (__s64)PT_REGS_PARM3(ctx),
				     .device_type = DEVICE_TYPE_CPU, .device_index = -1};
	if (!event.address || event.bytes <= 0)
		return 0;
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	return emit_memory_event(ids, capture_python_stack(target, ids), &event);
}

/* Delete(this, ptr). */
SEC("uprobe.multi")
int memory_freed(struct pt_regs *ctx)
{
	struct memory_event event = {.address = PT_REGS_PARM2(ctx), .device_type = DEVICE_TYPE_CPU, .device_index = -1};
	if (!event.address)
		return 0;
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	return emit_memory_event(ids, 0, &event);
}

/* reportMemoryUsageToProfiler(ptr, alloc_size, total_allocated, total_reserved, device): the
 * c10::Device {int8 type; int8 index} comes in the fifth argument register. The CPU's reports
 * (mapped shared memory, and the CPU reporter's own while torch's profiler records memory) are
 * left out: New and Delete give the CPU's blocks. */
SEC("uprobe.multi")
int device_memory_reported(struct pt_regs *ctx)
{
	__u64 device = PT_REGS_PARM5(ctx);
	struct memory_event event = {.address = PT_REGS_PARM1(ctx), .bytes = (__s64)PT_REGS_PARM2(ctx),
				     .total_allocated = PT_REGS_PARM3(ctx), .total_reserved = PT_REGS_PARM4(ctx),
				     .device_type = (__s8)(device & 0xff), .device_index = (__s8)((device >> 8) & 0xff)};
	if (event.device_type == DEVICE_TYPE_CPU || !event.address || !event.bytes)
		return 0;
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	return emit_memory_event(ids, event.bytes > 0 ? capture_python_stack(target, ids) : 0, &event);
}

#endif /* TPROF_BPF_MEMORY_PROBES_BPF_H */
