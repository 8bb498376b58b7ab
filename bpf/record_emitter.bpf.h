/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Writing records into the op tracer's ring buffer: each one a head (op_record.h) and, for
 * some kinds, a payload assembled in per-thread scratch memory first. Shared by every probe of
 * the op tracer, which all stay silent until userspace sets their target's `recording`.
 */
#ifndef TPROF_BPF_RECORD_EMITTER_BPF_H
#define TPROF_BPF_RECORD_EMITTER_BPF_H

#include "argument_reader.bpf.h"
#include "op_arguments.h"
#include "op_record.h"
#include "python_walker.bpf.h"
#include "record_ring.bpf.h"

/* A record being assembled: its head, then the payload of its kind; after them, never sent, the
 * lists whose further elements follow the record (the verifier forbids indexing them on the
 * stack). */
struct record_with_arguments {
	struct op_record head;
	union {
		struct op_arguments arguments;
		struct annotation_enter annotation_enter;
		struct annotation_exit annotation_exit;
		struct recompile_reason recompile_reason;
		struct boxed_operator boxed_operator;
		struct spilled_arguments spilled;
		struct list_elements elements;
		struct {
			struct autograd_node node;
			struct op_arguments node_arguments;
		};
	};
	struct pending_lists pending;
};

/* Per thread, like the op walk buffer: a probe can be preempted by another thread's probe. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct record_with_arguments);
} record_scratch SEC(".maps");

static __always_inline struct record_with_arguments *record_buffer(void)
{
	return bpf_task_storage_get(&record_scratch, bpf_get_current_task_btf(), 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
}

static __always_inline void fill_head(struct op_record *head, struct thread_ids ids, __u32 op_id, __u8 kind,
				      __u64 python_stack_id, __u64 now, __u64 sequence_counter)
{
	head->timestamp_ns = now;
	head->python_stack_id = python_stack_id;
	head->sequence_counter = sequence_counter;
	head->tid = ids.tid;
	head->tgid = ids.tgid;
	head->op_id = op_id;
	head->kind = kind;
	head->exit_cause = 0;
	head->abi_version = OP_RECORD_ABI_VERSION;
}

/* A record without payload; `cause` goes in its exit_cause byte. */
static __always_inline int emit_head(struct thread_ids ids, __u32 op_id, __u8 kind, __u64 python_stack_id, __u64 now,
				     __u64 sequence_counter, __u8 cause)
{
	struct op_record *rec = bpf_ringbuf_reserve(&op_records, sizeof(*rec), 0);
	if (!rec) {
		count_loss(ids.slot, LOSS_RING_BUFFER_FULL);
		return 0;
	}
	fill_head(rec, ids, op_id, kind, python_stack_id, now, sequence_counter);
	rec->exit_cause = cause;
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int emit(struct thread_ids ids, __u32 op_id, __u8 kind, __u64 python_stack_id, __u64 now,
				__u64 sequence_counter)
{
	return emit_head(ids, op_id, kind, python_stack_id, now, sequence_counter, 0);
}

/* A stack sample: `stack_id` taken as `cause` (enum sample_cause) says. */
static __always_inline int emit_sample(struct thread_ids ids, __u64 stack_id, __u64 now, __u8 cause)
{
	return emit_head(ids, 0, OP_RECORD_PYTHON_SAMPLE, stack_id, now, SEQUENCE_COUNTER_UNKNOWN, cause);
}

/* Sends the record assembled in `record` for the target in `ids`: its head and `payload_bytes`
 * of payload. */
static __always_inline int emit_assembled(struct thread_ids ids, struct record_with_arguments *record,
					  __u32 payload_bytes)
{
	__u32 size = sizeof(record->head) + payload_bytes;
	if (size > __builtin_offsetof(struct record_with_arguments, pending))
		size = __builtin_offsetof(struct record_with_arguments, pending);
	if (bpf_ringbuf_output(&op_records, record, size, BPF_RB_NO_WAKEUP))
		count_loss(ids.slot, LOSS_RING_BUFFER_FULL);
	return 0;
}

/*
 * This thread's record buffer with its head filled in, or NULL (counted as a loss) when the
 * kernel has no memory for it.
 */
static __always_inline struct record_with_arguments *begin_record(struct thread_ids ids, __u32 op_id, __u8 kind,
								  __u64 python_stack_id, __u64 now,
								  __u64 sequence_counter)
{
	struct record_with_arguments *record = record_buffer();
	if (!record) {
		count_loss(ids.slot, LOSS_ARGUMENTS_UNREADABLE);
		return NULL;
	}
	fill_head(&record->head, ids, op_id, kind, python_stack_id, now, sequence_counter);
	return record;
}

#endif /* TPROF_BPF_RECORD_EMITTER_BPF_H */
