/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Python frame walker, shared by the op probes and the stack sampler.
 *
 * ATen ops run with the GIL released, so neither "current thread state" pointer of CPython
 * is set at an op probe. The walker instead finds the thread's PyThreadState in the
 * interpreter's thread list by its thread_id, which is pthread_self(), i.e. the thread's
 * fsbase, and caches it per thread. It then follows the frame chain, one read per frame, and
 * stores each distinct stack once in python_stacks under a hash of its content.
 */
#ifndef TPROF_BPF_PYTHON_WALKER_BPF_H
#define TPROF_BPF_PYTHON_WALKER_BPF_H

#include "op_record.h"
#include "python_stack.h"
#include "record_ring.bpf.h"
#include "targets.bpf.h"

struct walk_scratch {
	struct op_record head; /* of the stack's record, when it is new: `stack` follows it directly */
	struct python_stack stack;
	__u8 frame_bytes[PYTHON_FRAME_READ_MAX];
	__u8 tstate_bytes[PYTHON_TSTATE_READ_MAX];
};
_Static_assert(__builtin_offsetof(struct walk_scratch, stack) == sizeof(struct op_record),
	       "a new stack's record is its head and the stack, sent as one block");

/*
 * Walk buffers. A walk must own its buffer until it is done, and two kinds of walk can
 * interleave: an op probe can be preempted by another thread's op probe on the same CPU, and
 * interrupted by the sampler (on its own thread, too). So op probes use per-thread storage,
 * and the sampler, which never nests with itself on a CPU, a per-CPU buffer.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct walk_scratch);
} op_walk_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk_scratch);
} sample_walk_scratch SEC(".maps");

static __always_inline struct walk_scratch *op_walk_buffer(void)
{
	return bpf_task_storage_get(&op_walk_scratch, bpf_get_current_task_btf(), 0,
				    BPF_LOCAL_STORAGE_GET_F_CREATE);
}

static __always_inline struct walk_scratch *sample_walk_buffer(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&sample_walk_scratch, &zero);
}

/* Userspace gets each new stack through the ring buffer (send_new_stack) and copies what it
 * missed there from this map; LRU makes room for new ones. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct python_stack);
} python_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u64);
} python_thread_states SEC(".maps");

static __always_inline __u64 read_user_u64(__u64 address)
{
	__u64 value = 0;
	bpf_probe_read_user(&value, sizeof(value), (const void *)address);
	return value;
}

/* A field of a prefix already read into `bytes`; offsets come from the target's walker config. */
static __always_inline __u64 field_u64(const __u8 *bytes, __u32 offset, __u32 capacity)
{
	if (offset > capacity - sizeof(__u64))
		return 0;
	return *(const __u64 *)(bytes + offset);
}

static __always_inline __u32 field_u32(const __u8 *bytes, __u32 offset, __u32 capacity)
{
	if (offset > capacity - sizeof(__u32))
		return 0;
	return *(const __u32 *)(bytes + offset);
}

static __always_inline __u8 field_u8(const __u8 *bytes, __u32 offset, __u32 capacity)
{
	if (offset > capacity - 1)
		return 0;
	return bytes[offset];
}

struct thread_search {
	const struct python_walker_config *config;
	__u64 thread_state;
	__u64 fsbase;
	__u64 found;
};

static long thread_search_step(__u32 index, void *context)
{
	struct thread_search *search = context;
	if (!search->thread_state)
		return 1;
	if (read_user_u64(search->thread_state + search->config->thread_thread_id) == search->fsbase) {
		search->found = search->thread_state;
		return 1;
	}
	search->thread_state = read_user_u64(search->thread_state + search->config->thread_next);
	return 0;
}

/* Reads the prefix of a thread state the walker needs into scratch->tstate_bytes and checks
 * that it belongs to the thread whose pthread_self() is `fsbase`. */
static __always_inline bool read_thread_state(const struct python_walker_config *config,
					      struct walk_scratch *scratch, __u64 thread_state, __u64 fsbase)
{
	__u32 size = config->tstate_read_size;
	if (size > PYTHON_TSTATE_READ_MAX)
		size = PYTHON_TSTATE_READ_MAX;
	if (!thread_state || bpf_probe_read_user(scratch->tstate_bytes, size, (const void *)thread_state))
		return false;
	return field_u64(scratch->tstate_bytes, config->thread_thread_id, PYTHON_TSTATE_READ_MAX) == fsbase;
}

/* Finds this thread's PyThreadState (cached per thread; the list walk only on a miss or a
 * stale entry) and leaves its prefix in scratch->tstate_bytes. False, counted, if there is
 * none: userspace says how many walks found no thread state, and how many of those gave up at
 * the search bound with threads left unexamined, so neither goes unnoticed. */
static __always_inline bool load_thread_state(const struct python_walker_config *config,
					      struct walk_scratch *scratch, struct thread_ids ids, bool count_misses)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 fsbase = task->thread.fsbase;
	__u64 *cached = bpf_map_lookup_elem(&python_thread_states, &ids.tid);
	if (cached && read_thread_state(config, scratch, *cached, fsbase))
		return true;

	__u64 interpreter = read_user_u64(config->runtime_address + config->runtime_interpreters_head);
	if (!interpreter) {
		if (count_misses)
			count_loss(ids.slot, LOSS_THREAD_STATE_NOT_FOUND);
		return false;
	}
	struct thread_search search = {
		.config = config,
		.thread_state = read_user_u64(interpreter + config->interpreter_threads_head),
		.fsbase = fsbase,
	};
	bpf_loop(PYTHON_MAX_THREAD_STATES, thread_search_step, &search, 0);
	if (!search.found || !read_thread_state(config, scratch, search.found, fsbase)) {
		/* A search that stopped with a thread state in hand ran into the bound. */
		if (count_misses)
			count_loss(ids.slot, !search.found && search.thread_state ? LOSS_THREAD_SEARCH_CUT
										  : LOSS_THREAD_STATE_NOT_FOUND);
		return false;
	}
	bpf_map_update_elem(&python_thread_states, &ids.tid, &search.found, BPF_ANY);
	return true;
}

/* The innermost frame of the thread state load_thread_state left in scratch->tstate_bytes. */
static __always_inline __u64 innermost_frame(const struct python_walker_config *config, struct walk_scratch *scratch)
{
	__u64 frame = field_u64(scratch->tstate_bytes, config->thread_frame, PYTHON_TSTATE_READ_MAX);
	if (config->cframe_current_frame >= 0 && frame)
		frame = read_user_u64(frame + config->cframe_current_frame);
	return frame;
}

/* The frames walked so far are counted in scratch->stack.depth, not here: the verifier knows the
 * exact value of a counter kept on the stack, so it checked frame_walk_step anew for each depth
 * the count reached, in each of the six programs that walk (loading the object took 1.2 s on a
 * 2-vCPU VM, 0.35 s since); map memory's contents it does not track, so it checks it once. */
struct frame_walk {
	const struct python_walker_config *config;
	struct walk_scratch *scratch;
	__u64 frame;
	__u64 hash;
};

static __always_inline __u64 mix_hash(__u64 hash, __u64 value)
{
	/* 64-bit multiply-xorshift (splitmix64's finalizer) chained over the frame fields. */
	hash ^= value + 0x9e3779b97f4a7c15ULL + (hash << 6) + (hash >> 2);
	hash ^= hash >> 30;
	hash *= 0xbf58476d1ce4e5b9ULL;
	hash ^= hash >> 27;
	return hash;
}

static __always_inline bool is_shim_frame(const struct python_walker_config *config, const __u8 *bytes)
{
	if (config->frame_owner < 0)
		return false;
	__s32 owner = field_u8(bytes, config->frame_owner, PYTHON_FRAME_READ_MAX);
	return owner == config->frame_owner_skip_a || owner == config->frame_owner_skip_b;
}

static __always_inline __u32 instruction_offset(const struct python_walker_config *config, const __u8 *bytes,
						__u64 code)
{
	if (config->instruction_encoding != PYTHON_INSTRUCTION_POINTER)
		return field_u32(bytes, config->frame_instruction, PYTHON_FRAME_READ_MAX);
	__u64 instruction = field_u64(bytes, config->frame_instruction, PYTHON_FRAME_READ_MAX);
	__u64 bytecode = code + config->code_adaptive;
	return instruction >= bytecode ? (__u32)((instruction - bytecode) / 2) : 0;
}

static long frame_walk_step(__u32 index, void *context)
{
	struct frame_walk *walk = context;
	const struct python_walker_config *config = walk->config;
	struct walk_scratch *scratch = walk->scratch;
	if (!walk->frame)
		return 1;
	__u32 size = config->frame_read_size;
	if (size > PYTHON_FRAME_READ_MAX)
		size = PYTHON_FRAME_READ_MAX;
	if (bpf_probe_read_user(scratch->frame_bytes, size, (const void *)walk->frame))
		return 1;
	const __u8 *bytes = scratch->frame_bytes;
	__u64 code = field_u64(bytes, config->frame_code, PYTHON_FRAME_READ_MAX) & ~config->executable_tag_mask;
	if (code && !is_shim_frame(config, bytes)) {
		__u32 depth = scratch->stack.depth;
		if (depth >= PYTHON_STACK_MAX_FRAMES) {
			scratch->stack.truncated = 1;
			return 1;
		}
		struct python_frame *frame = &scratch->stack.frames[depth & (PYTHON_STACK_MAX_FRAMES - 1)];
		frame->frame = walk->frame;
		frame->code = code;
		frame->first_local = field_u64(bytes, config->frame_localsplus, PYTHON_FRAME_READ_MAX);
		frame->instruction = instruction_offset(config, bytes, code);
		frame->reserved = 0;
		walk->hash = mix_hash(walk->hash, frame->frame);
		walk->hash = mix_hash(walk->hash, frame->code);
		walk->hash = mix_hash(walk->hash, frame->first_local);
		walk->hash = mix_hash(walk->hash, frame->instruction);
		scratch->stack.depth = depth + 1;
	}
	walk->frame = field_u64(bytes, config->frame_previous, PYTHON_FRAME_READ_MAX);
	return 0;
}

/*
 * A stack stored for the first time also goes to userspace through the ring buffer, ahead of
 * the records that name it. Copied from the LRU map only after userspace has read those
 * records, it could have been evicted by then: each thread's stacks are its own (frame
 * addresses differ), so hundreds of threads make thousands of distinct stacks, and userspace
 * can be a whole ring buffer behind. Only the frames walked are sent.
 */
static __always_inline void send_new_stack(struct walk_scratch *scratch, struct thread_ids ids, __u64 stack_id)
{
	struct op_record *head = &scratch->head;
	__builtin_memset(head, 0, sizeof(*head));
	head->timestamp_ns = bpf_ktime_get_ns();
	head->tid = ids.tid;
	head->tgid = ids.tgid;
	head->python_stack_id = stack_id;
	head->sequence_counter = SEQUENCE_COUNTER_UNKNOWN;
	head->kind = OP_RECORD_PYTHON_STACK;
	head->abi_version = OP_RECORD_ABI_VERSION;
	__u32 depth = scratch->stack.depth;
	if (depth > PYTHON_STACK_MAX_FRAMES)
		depth = PYTHON_STACK_MAX_FRAMES;
	__u64 size = sizeof(*head) + __builtin_offsetof(struct python_stack, frames) + depth * sizeof(struct python_frame);
	if (bpf_ringbuf_output(&op_records, head, size, BPF_RB_NO_WAKEUP))
		count_loss(ids.slot, LOSS_RING_BUFFER_FULL);
}

/* Walks the calling thread's Python stack in `scratch` (owned by this walk until it returns)
 * and returns the id the stack is stored under, or 0. A thread without a Python thread state
 * is counted as a loss where a stack was expected (`count_misses`): at an op, not when any
 * thread of the target blocks. Stack ids hash the process id too: processes forked from one
 * another hold the same frames at the same addresses, which may mean other code later. */
static __always_inline __u64 walk_python_stack(const struct target_settings *target, struct thread_ids ids,
					       struct walk_scratch *scratch, bool count_misses)
{
	const struct python_walker_config *config = &target->python;
	if (!config->enabled)
		return 0;
	if (!scratch) {
		count_loss(ids.slot, LOSS_STACK_UNREADABLE);
		return 0;
	}
	if (!load_thread_state(config, scratch, ids, count_misses))
		return 0; /* counted there, by cause */
	__u64 frame = innermost_frame(config, scratch);

	struct frame_walk walk = {
		.config = config, .scratch = scratch, .frame = frame, .hash = mix_hash(0x74707266ULL, ids.tgid)};
	scratch->stack.truncated = 0;
	scratch->stack.depth = 0;
	bpf_loop(PYTHON_STACK_MAX_FRAMES + 64, frame_walk_step, &walk, 0);
	__u64 stack_id = walk.hash | 1; /* never 0, which means "no stack" */
	/* Look first: an LRU update copies the whole 4 KiB value before it finds the key exists,
	 * and almost every stack has been seen before. */
	if (bpf_map_lookup_elem(&python_stacks, &stack_id))
		return stack_id;
	long stored = bpf_map_update_elem(&python_stacks, &stack_id, &scratch->stack, BPF_NOEXIST);
	if (stored && stored != -17 /* EEXIST: already there */) {
		count_loss(ids.slot, LOSS_STACK_NOT_STORED);
		return 0;
	}
	if (!stored)
		send_new_stack(scratch, ids, stack_id);
	return stack_id;
}

/* The calling thread's stack at an op or a range, in its per-thread walk buffer; 0 without
 * Python stacks. */
static __always_inline __u64 capture_python_stack(const struct target_settings *target, struct thread_ids ids)
{
	if (!target->python.enabled)
		return 0;
	return walk_python_stack(target, ids, op_walk_buffer(), true);
}

#endif /* TPROF_BPF_PYTHON_WALKER_BPF_H */
