/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Writing records into the op tracer's ring buffer: each one a head (op_record.h) and, for
 * some kinds, a payload assembled in per-thread scratch memory first. Shared by every probe of
 * the op tracer, which all stay silent until userspace sets `recording`.
 */
#ifndef TPROF_BPF_RECORD_EMITTER_BPF_H
#define TPROF_BPF_RECORD_EMITTER_BPF_H

#include "op_arguments.h"
#include "op_record.h"
#include "python_walker.bpf.h"
#include "record_ring.bpf.h"

/* tprof's PID namespace (the inode of /proc/self/ns/pid), and whether it is the initial one.
 * Ids in records are the ones tprof sees in its /proc: the host's for a node agent, the pod's
 * for a sidecar sharing the target's namespace, whatever namespace the target itself is in. */
const volatile __u64 pid_namespace_inode = 0;
const volatile bool pid_namespace_is_initial = true;
/* The namespace's depth below the initial one, plus one; 0 until a probe has found it. No
 * file tells a process its own depth (its NSpid starts at its /proc's namespace). */
__u32 pid_namespace_level_plus_one = 0;

#define MAX_PID_NAMESPACE_DEPTH 32 /* the kernel's MAX_PID_NS_LEVEL */
/*
 * Set by userspace once every probe is attached and cleared before any is removed: links go
 * one at a time (a uprobe's removal waits for readers, ~0.1 s each), and a probe that outlived
 * its partners would record entries without exits, or backward nodes without their ops.
 */
volatile __u32 recording = 0;

struct thread_ids {
	__u32 tgid;
	__u32 tid;
};

/* A record being assembled: its head, then the payload of its kind. */
struct record_with_arguments {
	struct op_record head;
	union {
		struct op_arguments arguments;
		struct annotation_enter annotation_enter;
		struct annotation_exit annotation_exit;
		struct spilled_arguments spilled;
		struct {
			struct autograd_node node;
			struct op_arguments node_arguments;
		};
	};
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

/* A pid holds one number per level, from the initial namespace down to the one it was made in:
 * the number at `level` and the inode of that level's namespace. */
static __always_inline bool read_pid_number(struct pid *pid, __u32 level, struct upid *number)
{
	return level <= pid->level && !bpf_probe_read_kernel(number, sizeof(*number), &pid->numbers[level]);
}

/* The level of tprof's namespace, found once among the levels of a pid inside it. */
static __always_inline int tprof_namespace_level(struct pid *pid)
{
	if (pid_namespace_level_plus_one)
		return pid_namespace_level_plus_one - 1;
	for (__u32 level = 0; level < MAX_PID_NAMESPACE_DEPTH; level++) {
		struct upid number = {};
		if (!read_pid_number(pid, level, &number))
			return -1;
		if (BPF_CORE_READ(number.ns, ns.inum) == pid_namespace_inode) {
			pid_namespace_level_plus_one = level + 1;
			return level;
		}
	}
	return -1;
}

/* The number `pid` has in tprof's PID namespace; 0 where it has none there (a task of an
 * unrelated namespace). */
static __always_inline __u32 number_in_tprof_namespace(struct pid *pid)
{
	if (!pid)
		return 0;
	int level = tprof_namespace_level(pid);
	struct upid number = {};
	if (level < 0 || !read_pid_number(pid, level, &number))
		return 0;
	if (BPF_CORE_READ(number.ns, ns.inum) != pid_namespace_inode)
		return 0;
	return (__u32)number.nr;
}

/* A task's ids as tprof sees them. */
static __always_inline struct thread_ids task_thread_ids(struct task_struct *task)
{
	if (pid_namespace_is_initial)
		return (struct thread_ids){.tgid = (__u32)task->tgid, .tid = (__u32)task->pid};
	return (struct thread_ids){.tgid = number_in_tprof_namespace(task->group_leader->thread_pid),
				   .tid = number_in_tprof_namespace(task->thread_pid)};
}

/* The current thread's ids as tprof sees them. bpf_get_ns_current_pid_tgid would not do: it
 * answers only for tasks of tprof's own namespace, and a node agent's targets sit in child
 * namespaces (containers). */
static __always_inline struct thread_ids current_thread_ids(void)
{
	if (pid_namespace_is_initial) {
		/* The initial namespace's numbers the kernel keeps at hand. */
		__u64 ids = bpf_get_current_pid_tgid();
		return (struct thread_ids){.tgid = ids >> 32, .tid = (__u32)ids};
	}
	return task_thread_ids(bpf_get_current_task_btf());
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
		count_loss(LOSS_RING_BUFFER_FULL);
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

/* Sends the record assembled in `record`: its head and `payload_bytes` of payload. */
static __always_inline int emit_assembled(struct record_with_arguments *record, __u32 payload_bytes)
{
	__u32 size = sizeof(record->head) + payload_bytes;
	if (size > sizeof(*record))
		size = sizeof(*record);
	if (bpf_ringbuf_output(&op_records, record, size, BPF_RB_NO_WAKEUP))
		count_loss(LOSS_RING_BUFFER_FULL);
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
		count_loss(LOSS_ARGUMENTS_UNREADABLE);
		return NULL;
	}
	fill_head(&record->head, ids, op_id, kind, python_stack_id, now, sequence_counter);
	return record;
}

#endif /* TPROF_BPF_RECORD_EMITTER_BPF_H */
