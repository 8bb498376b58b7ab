/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * record_function("name") ranges, which torch's Python and torch.optim open even when no
 * profiler runs: the kernel that takes the name, at::RecordFunction's constructor (USER_SCOPE)
 * that starts the range, and RecordFunction::end() that closes it. And the ranges dynamo's C
 * frame evaluator opens the same way with FUNCTION scope around every call of a compiled graph
 * ("Torch-Compiled Region: 0/1"): the function it hands the name to, then the same constructor
 * and end(). And c10::monitor::WaitCounter's ranges (start() to stop()), which torch 2.x opens
 * around its compile work ("pytorch.wait_counter.dynamo_compile") whether or not a profiler
 * runs, where 2.14's `(dynamo_timed)` record_function ranges open only while its profiler does.
 */
#ifndef TPROF_BPF_ANNOTATION_PROBES_BPF_H
#define TPROF_BPF_ANNOTATION_PROBES_BPF_H

#include "python_objects.bpf.h"
#include "python_walker.bpf.h"
#include "recompile_reason_site.h"
#include "record_emitter.bpf.h"

/* The name handed to a record_function kernel or to dynamo's range, kept until it constructs its
 * RecordFunction, of the scope that caller gives it. */
struct pending_annotation {
	__u32 name_length;
	__u32 scope;
	char name[ANNOTATION_NAME_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tid */
	__type(value, struct pending_annotation);
} pending_annotations SEC(".maps");

/* A RecordFunction of an open annotation: its address in its process (a forked target holds
 * the same addresses as its parent). */
struct annotation_key {
	__u64 handle;
	__u32 tgid;
	__u32 reserved;
};

/* RecordFunctions of open annotations: their end() closes the range; other end()s are ignored. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct annotation_key);
	__type(value, __u32);
} open_annotations SEC(".maps");

#define RECORD_SCOPE_FUNCTION 0 /* at::RecordScope::FUNCTION */
#define RECORD_SCOPE_USER 7     /* at::RecordScope::USER_SCOPE */

/* Per target slot: the Optimizer.step annotations its record_function kernels named since it
 * became a target (step_marker). --max-overhead takes every other probe here out between
 * windows (RecordFunction's constructor and end() run for every autograd node): a ProfilerStep
 * keeps its real number across the steps no window saw. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TARGET_SLOTS_MAX);
	__type(key, __u32);
	__type(value, __u64);
} optimizer_steps SEC(".maps");

/* torch.optim's record_function around every step(): "Optimizer.step#SGD.step". */
static const char optimizer_step_prefix[] = "Optimizer.step#";

#define OPTIMIZER_STEP_PREFIX_LENGTH (sizeof(optimizer_step_prefix) - 1)

/* The record_function kernels, like annotation_name, but only counting the optimizer's steps:
 * 16 bytes read, where annotation_name copies the whole name for the constructor. */
SEC("uprobe.multi")
int step_marker(struct pt_regs *ctx)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	__u64 string[2] = {};
	char prefix[OPTIMIZER_STEP_PREFIX_LENGTH] = {};
	if (bpf_probe_read_user(string, sizeof(string), (const void *)PT_REGS_PARM2(ctx)) ||
	    string[1] < OPTIMIZER_STEP_PREFIX_LENGTH ||
	    bpf_probe_read_user(prefix, sizeof(prefix), (const void *)string[0]))
		return 0;
	for (int i = 0; i < (int)OPTIMIZER_STEP_PREFIX_LENGTH; i++)
		if (prefix[i] != optimizer_step_prefix[i])
			return 0;
	__u64 *count = bpf_map_lookup_elem(&optimizer_steps, &ids.slot);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

/* The record_function kernels: rsi is `const std::string& name` ({char* data; size_t length}). */
SEC("uprobe.multi")
int annotation_name(struct pt_regs *ctx)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	__u64 string[2] = {};
	if (bpf_probe_read_user(string, sizeof(string), (const void *)PT_REGS_PARM2(ctx)))
		return 0;
	struct pending_annotation pending = {.scope = RECORD_SCOPE_USER};
	pending.name_length = (__u32)string[1];
	__u32 copied = string[1] < ANNOTATION_NAME_MAX - 1 ? (__u32)string[1] : ANNOTATION_NAME_MAX - 1;
	if (bpf_probe_read_user(pending.name, copied & (ANNOTATION_NAME_MAX - 1), (const void *)string[0]))
		return 0;
	bpf_map_update_elem(&pending_annotations, &ids.tid, &pending, BPF_ANY);
	return 0;
}

/* Where dynamo names a compiled graph's range (`const char*`): the cookie says which argument
 * holds it, 1 (torch 2.6's _pytorch_record_function_enter) or 4 (2.14's dynamo_eval_custom_code). */
SEC("uprobe.multi")
int compiled_region_name(struct pt_regs *ctx)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	/* Both read as they are: the verifier refuses a context pointer moved by a chosen offset. */
	__u64 first = PT_REGS_PARM1(ctx), fourth = PT_REGS_PARM4(ctx);
	barrier_var(first);
	barrier_var(fourth);
	const void *name = (const void *)(bpf_get_attach_cookie(ctx) == 4 ? fourth : first);
	struct pending_annotation pending = {.scope = RECORD_SCOPE_FUNCTION};
	long length = bpf_probe_read_user_str(pending.name, sizeof(pending.name), name);
	if (length <= 0)
		return 0;
	pending.name_length = (__u32)length - 1;
	bpf_map_update_elem(&pending_annotations, &ids.tid, &pending, BPF_ANY);
	return 0;
}

/* Opens the range `named` names, held by `handle`: its RecordFunction, or its wait counter (whose
 * end() or stop() names it again). */
static __always_inline int open_annotation(const struct target_settings *target, struct thread_ids ids, __u64 handle,
					   const struct pending_annotation *named)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 stack_id = capture_python_stack(target, ids);
	struct record_with_arguments *record = begin_record(ids, 0, OP_RECORD_ANNOTATION_ENTER, stack_id, now,
			SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return 0;
	struct annotation_enter *enter = &record->annotation_enter;
	enter->handle = handle;
	enter->name_length = named->name_length;
	enter->scope = named->scope;
	__u64 *steps = bpf_map_lookup_elem(&optimizer_steps, &ids.slot);
	enter->optimizer_steps = steps ? (__u32)*steps : 0;
	__builtin_memcpy(enter->name, named->name, sizeof(enter->name));
	struct annotation_key key = {.handle = handle, .tgid = ids.tgid};
	__u32 one = 1;
	bpf_map_update_elem(&open_annotations, &key, &one, BPF_ANY);
	return emit_assembled(ids, record, sizeof(*enter));
}

/* RecordFunction::RecordFunction(RecordScope): a caller that just named a range of this scope
 * builds it. */
SEC("uprobe.multi")
int annotation_begin(struct pt_regs *ctx)
{
	__u64 scope = PT_REGS_PARM2(ctx);
	if (scope != RECORD_SCOPE_USER && scope != RECORD_SCOPE_FUNCTION)
		return 0;
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	/* Most FUNCTION-scope RecordFunctions (the autograd engine's) have no name waiting: they
	 * cost this lookup and nothing more. */
	struct pending_annotation *pending = bpf_map_lookup_elem(&pending_annotations, &ids.tid);
	if (!pending || pending->scope != scope)
		return 0;
	int emitted = open_annotation(target, ids, PT_REGS_PARM1(ctx), pending);
	bpf_map_delete_elem(&pending_annotations, &ids.tid);
	return emitted;
}

/* A WaitCounterHandle is a reference to its key's WaitCounterImpl, a singleton per key that
 * does not keep the key (c10/util/WaitCounter.cpp); Python's guard() starts and stops a copy of
 * the handle. So the constructor's entry keeps the key for the thread, its `ret` reads the impl
 * the handle now points to and names it: a start() on any handle of that impl opens a range of
 * that name. An impl whose handles were all built before the attach (C++'s static ones) opens
 * none. */
struct wait_counter_being_built {
	__u64 handle;
	struct pending_annotation key;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32); /* tid */
	__type(value, struct wait_counter_being_built);
} wait_counters_being_built SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct annotation_key); /* the impl's address */
	__type(value, struct pending_annotation);
} wait_counter_keys SEC(".maps");

/* WaitCounterHandle::WaitCounterHandle(std::string_view key): this in rdi, the view's length in
 * rsi and its data in rdx. */
SEC("uprobe.multi")
int wait_counter_building(struct pt_regs *ctx)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	struct wait_counter_being_built built = {.handle = PT_REGS_PARM1(ctx)};
	__u64 length = PT_REGS_PARM2(ctx);
	built.key.scope = ANNOTATION_SCOPE_WAIT_COUNTER;
	built.key.name_length = (__u32)length;
	__u32 copied = length < ANNOTATION_NAME_MAX - 1 ? (__u32)length : ANNOTATION_NAME_MAX - 1;
	if (bpf_probe_read_user(built.key.name, copied & (ANNOTATION_NAME_MAX - 1), (const void *)PT_REGS_PARM3(ctx)))
		return 0;
	bpf_map_update_elem(&wait_counters_being_built, &ids.tid, &built, BPF_ANY);
	return 0;
}

/* The constructor's `ret`s: the handle holds its impl's address now. */
SEC("uprobe.multi")
int wait_counter_built(struct pt_regs *ctx)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	struct wait_counter_being_built *built = bpf_map_lookup_elem(&wait_counters_being_built, &ids.tid);
	if (!built)
		return 0;
	struct annotation_key impl = {.tgid = ids.tgid};
	if (!bpf_probe_read_user(&impl.handle, sizeof(impl.handle), (const void *)built->handle) && impl.handle)
		bpf_map_update_elem(&wait_counter_keys, &impl, &built->key, BPF_ANY);
	bpf_map_delete_elem(&wait_counters_being_built, &ids.tid);
	return 0;
}

/* WaitCounterHandle::start(), which returns a SmallVector: the slot for it in rdi, this in rsi.
 * Opens the range of an impl named since the attach; its stop() closes it (wait_counter_stop). */
SEC("uprobe.multi")
int wait_counter_start(struct pt_regs *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	struct annotation_key impl = {.tgid = ids.tgid};
	__u64 handle = PT_REGS_PARM2(ctx);
	if (bpf_probe_read_user(&impl.handle, sizeof(impl.handle), (const void *)handle))
		return 0;
	struct pending_annotation *key = bpf_map_lookup_elem(&wait_counter_keys, &impl);
	return key ? open_annotation(target, ids, handle, key) : 0;
}

/* Closes the open annotation `key` names: its end() or stop() ran. */
static __always_inline int close_annotation(struct thread_ids ids, struct annotation_key key)
{
	bpf_map_delete_elem(&open_annotations, &key);
	__u64 now = bpf_ktime_get_ns();
	struct record_with_arguments *record =
		begin_record(ids, 0, OP_RECORD_ANNOTATION_EXIT, 0, now, SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return 0;
	struct annotation_exit *exit = &record->annotation_exit;
	exit->handle = key.handle;
	return emit_assembled(ids, record, sizeof(*exit));
}

/* RecordFunction::end(): closes an open annotation (also runs for every other RecordFunction). */
SEC("uprobe.multi")
int annotation_end(struct pt_regs *ctx)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	struct annotation_key key = {.handle = PT_REGS_PARM1(ctx), .tgid = ids.tgid};
	if (!bpf_map_lookup_elem(&open_annotations, &key))
		return 0;
	return close_annotation(ids, key);
}

/* Per target slot: where its dynamo's `_compile` keeps why it compiles again
 * (recompile_reason_site.h); code 0 until userspace has found it. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TARGET_SLOTS_MAX);
	__type(key, __u32);
	__type(value, struct recompile_reason_site);
} recompile_reason_sites SEC(".maps");

/* The str dynamo's `_compile` on this thread's stack keeps as its recompile reason; 0 if there
 * is none (not a recompile, the local not set yet, no such frame). */
static __always_inline __u64 find_recompile_reason(const struct target_settings *target, struct thread_ids ids,
						   const struct recompile_reason_site *site)
{
	__u64 frame = find_python_frame_of(target, ids, site->code);
	if (!frame)
		return 0;
	__u64 reason = read_user_u64(frame + site->local_offset) & ~site->slot_tag_mask;
	if (reason && (site->flags & RECOMPILE_REASON_IN_CELL))
		reason = python_cell_contents(reason);
	if (reason && (site->flags & RECOMPILE_REASON_IN_LIST))
		reason = python_list_first(reason);
	return reason && is_python_ascii_str(reason) ? reason : 0;
}

/* Sends the recompile reason of the compile whose wait counter `handle` is stopping, if its
 * `_compile` holds one. */
static __always_inline void send_recompile_reason(const struct target_settings *target, struct thread_ids ids,
						  __u64 handle)
{
	const struct recompile_reason_site *site = bpf_map_lookup_elem(&recompile_reason_sites, &ids.slot);
	if (!site || !site->code)
		return;
	__u64 reason = find_recompile_reason(target, ids, site);
	if (!reason)
		return;
	struct record_with_arguments *record =
		begin_record(ids, 0, OP_RECORD_RECOMPILE_REASON, 0, bpf_ktime_get_ns(), SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return;
	struct recompile_reason *out = &record->recompile_reason;
	__u64 length = python_str_length(reason);
	out->handle = handle;
	out->length = (__u32)length;
	out->reserved = 0;
	__u32 copied = length < RECOMPILE_REASON_MAX - 1 ? (__u32)length : RECOMPILE_REASON_MAX - 1;
	if (bpf_probe_read_user(out->text, copied & (RECOMPILE_REASON_MAX - 1), (const void *)(reason + site->ascii_data)))
		return;
	emit_assembled(ids, record, sizeof(*out));
}

/* WaitCounterHandle::stop(): `this` in rdi, as RecordFunction::end(). A compile's counter stops
 * inside dynamo's `_compile`, which by then holds why it compiled again: that goes first. */
SEC("uprobe.multi")
int wait_counter_stop(struct pt_regs *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	struct annotation_key key = {.handle = PT_REGS_PARM1(ctx), .tgid = ids.tgid};
	if (!bpf_map_lookup_elem(&open_annotations, &key))
		return 0;
	send_recompile_reason(target, ids, key.handle);
	return close_annotation(ids, key);
}

#endif /* TPROF_BPF_ANNOTATION_PROBES_BPF_H */
