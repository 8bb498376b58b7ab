/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Closing ranges without uretprobes. A uretprobe swaps the return address on the stack for a
 * trampoline that has no unwind info, so a C++ exception thrown through that frame aborts the
 * target. Instead, each thread keeps a stack of its open ranges (op, boxed op, evaluate_function,
 * node apply) with the stack pointer at entry, where rsp points at the return address:
 *   - at a `ret` of a probed function rsp is that same slot, so the range whose entry rsp
 *     equals it has returned; `ret` sites may be shared by several functions, so a range is
 *     found by stack pointer, never by the probed address;
 *   - at __cxa_begin_catch every open range whose entry rsp is <= the catch's rsp was unwound
 *     by the exception (the handler's call reuses the return-address slot of the call that
 *     threw, hence <=);
 *   - a range whose entry rsp is <= the rsp of a later entry, or < that of a later `ret`, on
 *     the same thread is already gone (longjmp, forced unwind, a tail call through a register):
 *     it is closed then, flagged inferred.
 */
#ifndef TPROF_BPF_OPEN_RANGES_BPF_H
#define TPROF_BPF_OPEN_RANGES_BPF_H

#include "op_record.h"
#include "record_emitter.bpf.h"

/* Deeper nesting than this is not tracked; its ranges are closed by their parents (counted). */
#define OPEN_RANGES_MAX 64

enum open_range_kind {
	OPEN_RANGE_OP = 0,
	OPEN_RANGE_EVALUATE = 1,
	OPEN_RANGE_NODE = 2,
	OPEN_RANGE_BOXED_OP = 3, /* its exit is an OP_RECORD_BOXED_OP_EXIT */
};

struct open_range {
	__u64 stack_pointer; /* rsp at entry: the address of the return address */
	__u32 op_id;         /* ops: the op id; 0 otherwise */
	__u32 kind;          /* enum open_range_kind */
};

struct open_range_stack {
	__u32 depth;
	__u32 reserved;
	struct open_range ranges[OPEN_RANGES_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct open_range_stack);
} open_range_stacks SEC(".maps");

static __always_inline struct open_range_stack *open_ranges(bool create)
{
	return bpf_task_storage_get(&open_range_stacks, bpf_get_current_task_btf(), 0,
				    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
}

static __always_inline struct open_range *top_range(struct open_range_stack *stack)
{
	__u32 depth = stack->depth;
	if (depth == 0 || depth > OPEN_RANGES_MAX)
		return NULL;
	return &stack->ranges[(depth - 1) & (OPEN_RANGES_MAX - 1)];
}

static __always_inline __u8 exit_record_kind(__u32 range_kind)
{
	if (range_kind == OPEN_RANGE_EVALUATE)
		return OP_RECORD_EVALUATE_EXIT;
	if (range_kind == OPEN_RANGE_NODE)
		return OP_RECORD_NODE_EXIT;
	if (range_kind == OPEN_RANGE_BOXED_OP)
		return OP_RECORD_BOXED_OP_EXIT;
	return OP_RECORD_EXIT;
}

/* An exit record without payload, for a range closed by `cause`. */
static __always_inline void emit_range_exit(const struct open_range *range, struct thread_ids ids, __u64 now, __u8 cause)
{
	struct op_record *rec = bpf_ringbuf_reserve(&op_records, sizeof(*rec), 0);
	if (!rec) {
		count_loss(ids.slot, LOSS_RING_BUFFER_FULL);
		return;
	}
	fill_head(rec, ids, range->op_id, exit_record_kind(range->kind), 0, now, SEQUENCE_COUNTER_UNKNOWN);
	rec->exit_cause = cause;
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
}

/*
 * Pops and closes, innermost first, every open range whose entry rsp is below `stack_pointer`
 * (or equal, with `inclusive`).
 */
static __always_inline void close_ranges_below(struct open_range_stack *stack, __u64 stack_pointer, bool inclusive,
					       __u8 cause, struct thread_ids ids, __u64 now)
{
	for (int i = 0; i < OPEN_RANGES_MAX; i++) {
		struct open_range *top = top_range(stack);
		if (!top)
			return;
		if (top->stack_pointer > stack_pointer || (!inclusive && top->stack_pointer == stack_pointer))
			return;
		emit_range_exit(top, ids, now, cause);
		stack->depth -= 1;
	}
}

/*
 * At a range's entry, before its entry record: closes what this entry proves gone, so that
 * their exits precede it in the stream. NULL when the thread has no stack (no memory).
 */
static __always_inline struct open_range_stack *prepare_range_entry(__u64 stack_pointer, struct thread_ids ids, __u64 now)
{
	struct open_range_stack *stack = open_ranges(true);
	if (stack)
		close_ranges_below(stack, stack_pointer, true, RANGE_EXIT_INFERRED, ids, now);
	return stack;
}

/* After its entry record: the range is open until a `ret` or a catch at or above it. */
static __always_inline void push_range(struct open_range_stack *stack, struct thread_ids ids, __u64 stack_pointer,
				       __u32 op_id, __u32 kind)
{
	if (!stack) {
		count_loss(ids.slot, LOSS_RANGE_NOT_TRACKED);
		return;
	}
	__u32 depth = stack->depth;
	if (depth >= OPEN_RANGES_MAX) {
		count_loss(ids.slot, LOSS_RANGE_NOT_TRACKED);
		return;
	}
	struct open_range *slot = &stack->ranges[depth & (OPEN_RANGES_MAX - 1)];
	slot->stack_pointer = stack_pointer;
	slot->op_id = op_id;
	slot->kind = kind;
	stack->depth = depth + 1;
}

/*
 * At a `ret` with rsp `stack_pointer`: the range it returns from, popped into `returned`;
 * false when it returns from no open range (a function that shares the site).
 */
static __always_inline bool pop_returning_range(__u64 stack_pointer, struct thread_ids ids, __u64 now,
						struct open_range *returned)
{
	struct open_range_stack *stack = open_ranges(false);
	if (!stack)
		return false;
	close_ranges_below(stack, stack_pointer, false, RANGE_EXIT_INFERRED, ids, now);
	struct open_range *top = top_range(stack);
	if (!top || top->stack_pointer != stack_pointer)
		return false;
	*returned = *top;
	stack->depth -= 1;
	return true;
}

/* At __cxa_begin_catch with rsp `stack_pointer`: everything the exception unwound. */
static __always_inline void close_unwound_ranges(__u64 stack_pointer, struct thread_ids ids, __u64 now)
{
	struct open_range_stack *stack = open_ranges(false);
	if (stack)
		close_ranges_below(stack, stack_pointer, true, RANGE_EXIT_UNWOUND, ids, now);
}

#endif /* TPROF_BPF_OPEN_RANGES_BPF_H */
