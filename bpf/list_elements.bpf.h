/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The elements of list arguments that did not fit in their op's record (a foreach op's
 * parameters, a 9-dim size list, its Scalar[]): sent right after it, from the same probe, as
 * OP_RECORD_LIST_ELEMENTS records of up to LIST_CHUNK_TENSORS tensors, LIST_CHUNK_INTS ints or
 * LIST_CHUNK_INTS / SCALAR_WORDS Scalars each, LIST_ELEMENTS_MAX elements of a list at most.
 * Userspace appends them to the list of the record its thread sent last.
 */
#ifndef TPROF_BPF_LIST_ELEMENTS_BPF_H
#define TPROF_BPF_LIST_ELEMENTS_BPF_H

#include "argument_reader.bpf.h"
#include "record_emitter.bpf.h"

struct chunk_walk {
	const struct tensor_layout *layout;
	struct thread_ids ids;
	__u32 op_id;
	__u64 now;
	struct list_source list;
};

/* Copies tensors [first, first + LIST_CHUNK_TENSORS) of the list; how many it could. */
/* A global function: the verifier checks its loop once. */
__noinline int copy_tensor_chunk(const struct tensor_layout *layout, const struct list_source *list,
				 struct list_elements *elements, __u64 end)
{
	if (!layout || !list || !elements)
		return 0;
	int count = 0;
	for (__u32 i = 0; i < LIST_CHUNK_TENSORS; i++) {
		__u64 element = (__u64)list->first + i;
		if (element >= end || !copy_tensor_window(layout, &elements->tensors[i], list_tensor_impl(list, element)))
			break;
		count++;
	}
	return count;
}

/* Copies the next elements of a list of `words`-word values (ints, Scalars) into ints[]; how
 * many. */
static __always_inline __u32 copy_word_chunk(const struct chunk_walk *walk, struct list_elements *elements, __u64 end,
					     __u32 words)
{
	__u64 left = end - walk->list.first;
	__u32 fit = LIST_CHUNK_INTS / words;
	__u32 count = left < fit ? (__u32)left : fit;
	__u32 bytes = count * words * sizeof(__s64);
	if (bytes > sizeof(elements->ints))
		bytes = sizeof(elements->ints);
	const void *source = (const void *)(walk->list.base + words * sizeof(__s64) * (__u64)walk->list.first);
	return bpf_probe_read_user(elements->ints, bytes, source) ? 0 : count;
}

/* One record of the list's next elements; 1 (stop) once the list is sent or cannot be read. */
static long emit_list_chunk(__u32 index, void *context)
{
	struct chunk_walk *walk = context;
	__u64 end = walk->list.length < LIST_ELEMENTS_MAX ? walk->list.length : LIST_ELEMENTS_MAX;
	if (walk->list.first >= end)
		return 1;
	struct record_with_arguments *record = begin_record(walk->ids, walk->op_id, OP_RECORD_LIST_ELEMENTS, 0, walk->now,
							    SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return 1;
	struct list_elements *elements = &record->elements;
	elements->argument = walk->list.argument;
	elements->kind = walk->list.kind;
	elements->reserved = 0;
	elements->first = walk->list.first;
	bool tensors = walk->list.kind == LIST_OF_TENSORS;
	__u32 count, payload = (__u32)__builtin_offsetof(struct list_elements, ints);
	/* Each branch bounds its own size: the verifier must see the record's length bounded. */
	if (tensors) {
		count = (__u32)copy_tensor_chunk(walk->layout, &walk->list, elements, end) & (2 * LIST_CHUNK_TENSORS - 1);
		payload += count * sizeof(struct tensor_copy);
	} else if (walk->list.kind == LIST_OF_SCALARS) {
		count = copy_word_chunk(walk, elements, end, SCALAR_WORDS) & (2 * LIST_CHUNK_INTS / SCALAR_WORDS - 1);
		payload += count * SCALAR_WORDS * sizeof(__s64);
	} else {
		count = copy_word_chunk(walk, elements, end, 1) & (2 * LIST_CHUNK_INTS - 1);
		payload += count * sizeof(__s64);
	}
	if (count == 0)
		return 1;
	elements->count = (__u8)count;
	emit_assembled(walk->ids, record, payload);
	walk->list.first += count;
	return tensors && count < LIST_CHUNK_TENSORS ? 1 : 0; /* a short chunk met an unreadable tensor */
}

struct pending_walk {
	struct chunk_walk chunk;
	const struct pending_lists *pending;
};

static long emit_pending_list(__u32 index, void *context)
{
	struct pending_walk *walk = context;
	if (index >= walk->pending->count || index >= PENDING_LISTS_MAX)
		return 1;
	/* The verifier needs the bound on the register that indexes (as in read_argument). */
	__u32 slot = index & (PENDING_LISTS_MAX - 1);
	asm volatile("" : "+r"(slot));
	slot &= PENDING_LISTS_MAX - 1;
	walk->chunk.list = walk->pending->lists[slot];
	bpf_loop(LIST_ELEMENTS_MAX / LIST_CHUNK_TENSORS, emit_list_chunk, &walk->chunk, 0);
	return 0;
}

/* Sends the pending lists' remaining elements, after the record they belong to. */
static __always_inline void emit_pending_lists(const struct tensor_layout *layout, struct thread_ids ids, __u32 op_id,
					       __u64 now, const struct pending_lists *pending)
{
	if (!pending->count)
		return;
	struct pending_walk walk = {.chunk = {.layout = layout, .ids = ids, .op_id = op_id, .now = now},
				    .pending = pending};
	bpf_loop(PENDING_LISTS_MAX, emit_pending_list, &walk, 0);
}

#endif /* TPROF_BPF_LIST_ELEMENTS_BPF_H */
