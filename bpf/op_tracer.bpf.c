// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Op tracer: one uprobe_multi link on the entries of every at::_ops::<op>::call in
 * libtorch_cpu (the attach cookie of each site is its op id), one on the `ret` instructions of
 * those functions and of the autograd functions, and one on __cxa_begin_catch: ranges close at
 * their `ret` or at the catch of the exception that unwound them, never through a uretprobe
 * (open_ranges.bpf.h says why). A perf-event sampler looks at the target's Python stacks
 * between ops, and the scheduler's switches at those of threads that wait (python_switch).
 * With shapes on, op records carry the op's arguments and returns (argument_reader.bpf.h); the
 * doubles of ops that take some are read by a second probe inside the op, where its code has
 * saved them (op_spilled_arguments).
 *
 * It also records what torch's RecordFunction would show besides ops: record_function()
 * ranges (annotation_probes.bpf.h) and the autograd engine's backward nodes
 * (autograd_probes.bpf.h); the GPU activity of the CUPTI injection library, where the
 * target loaded it (device_activity_probes.bpf.h); and, with --memory, the blocks torch's CPU
 * allocator hands out and takes back (memory_probes.bpf.h).
 *
 * One object serves every target of a session (targets.bpf.h): each program finds the calling
 * process's settings by its pid, and its records carry that pid, so that userspace splits one
 * ring buffer into a trace per process. Probe links are still one per target and program: a
 * link without a pid would put a breakpoint into every process on the machine that maps the
 * library, traced or not.
 *
 * Records are submitted with BPF_RB_NO_WAKEUP: a wakeup per record costs ~6 us on the
 * target's thread, while userspace drains the buffer on a timer anyway.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "annotation_probes.bpf.h"
#include "argument_reader.bpf.h"
#include "autograd_probes.bpf.h"
#include "boxed_operators.bpf.h"
#include "device_activity_probes.bpf.h"
#include "list_elements.bpf.h"
#include "memory_probes.bpf.h"
#include "op_record.h"
#include "open_ranges.bpf.h"
#include "python_walker.bpf.h"
#include "record_emitter.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * Where this thread's sequence counter lives, once found: a thread's TLS block for a module
 * stays where it is until the thread exits, which frees its task storage too. Caching it
 * turns three user reads per op entry and exit into one.
 */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, __u64);
} sequence_counter_addresses SEC(".maps");

/*
 * The address of at::sequence_number's counter in the current thread's TLS, as __tls_get_addr
 * would find it: the thread's DTV (tcbhead_t.dtv, at fsbase + 8) holds each module's TLS
 * block, 16 bytes per entry. 0 while the block is not allocated yet.
 */
static __always_inline __u64 locate_sequence_counter(const struct target_settings *target)
{
	__u64 tls_index[2] = {};
	if (bpf_probe_read_user(tls_index, sizeof(tls_index), (const void *)target->sequence_counter_tls_index) ||
	    !tls_index[0])
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 dtv = read_user_u64(task->thread.fsbase + 8);
	__u64 block = dtv ? read_user_u64(dtv + 16 * tls_index[0]) : 0;
	if (!block || block == ~0ULL)
		return 0;
	return block + tls_index[1] + target->sequence_counter_field_offset;
}

/* at::sequence_number::peek() of the current thread; SEQUENCE_COUNTER_UNKNOWN when not located. */
static __always_inline __u64 read_sequence_counter(const struct target_settings *target)
{
	if (!target->sequence_counter_tls_index)
		return SEQUENCE_COUNTER_UNKNOWN;
	__u64 *cached = bpf_task_storage_get(&sequence_counter_addresses, bpf_get_current_task_btf(), 0,
					     BPF_LOCAL_STORAGE_GET_F_CREATE);
	__u64 address = cached ? *cached : 0;
	if (!address) {
		address = locate_sequence_counter(target);
		if (cached)
			*cached = address;
	}
	__u64 counter = 0;
	if (!address || bpf_probe_read_user(&counter, sizeof(counter), (const void *)address))
		return SEQUENCE_COUNTER_UNKNOWN;
	return counter;
}

/* The op's plan when its arguments are to be captured, else NULL. */
static __always_inline const struct op_plan *capture_plan(const struct target_settings *target,
							  struct thread_ids ids, __u32 op_id)
{
	if (!target->tensors.enabled)
		return NULL;
	return op_plan_of(ids.slot, op_id);
}

/* An op entry whose arguments are read: its entry record, then, past OP_ARGUMENTS_MAX
 * arguments, an OP_RECORD_MORE_ARGUMENTS record, each followed by its lists' further elements.
 * One bpf_loop callback writes both, so that the verifier checks the argument reader once. */
struct input_records {
	const struct target_settings *target;
	const struct op_plan *plan;
	struct entry_registers registers;
	struct thread_ids ids;
	__u32 op_id;
	__u64 now;
	__u64 stack_id;
	__u64 counter;
	bool entry_sent;
};

static long emit_input_record(__u32 index, void *context)
{
	struct input_records *inputs = context;
	__u32 first = index * OP_ARGUMENTS_MAX;
	if (index > 0 && first >= inputs->plan->argument_count)
		return 1;
	struct record_with_arguments *record =
		index == 0 ? begin_record(inputs->ids, inputs->op_id, OP_RECORD_ENTER, inputs->stack_id, inputs->now,
					  inputs->counter)
			   : begin_record(inputs->ids, inputs->op_id, OP_RECORD_MORE_ARGUMENTS, 0, inputs->now,
					  SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return 1;
	const struct tensor_layout *layout = &inputs->target->tensors;
	read_op_inputs(layout, &inputs->registers, inputs->plan, first, &record->arguments, &record->pending);
	emit_assembled(inputs->ids, record, arguments_size(&record->arguments));
	inputs->entry_sent = true;
	emit_pending_lists(layout, inputs->ids, inputs->op_id, inputs->now, &record->pending);
	return 0;
}

SEC("uprobe.multi")
int op_enter(struct pt_regs *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 op_id = (__u32)bpf_get_attach_cookie(ctx);
	struct open_range_stack *open = prepare_range_entry(PT_REGS_SP(ctx), ids, now);
	__u64 counter = read_sequence_counter(target);
	__u64 stack_id = capture_python_stack(target, ids);
	const struct op_plan *plan = capture_plan(target, ids, op_id);
	struct input_records inputs = {.target = target, .plan = plan, .ids = ids, .op_id = op_id, .now = now,
				       .stack_id = stack_id, .counter = counter};
	if (plan) {
		save_entry_registers(ctx, &inputs.registers);
		bpf_loop(OP_PLAN_ARGUMENTS_MAX / OP_ARGUMENTS_MAX, emit_input_record, &inputs, 0);
	}
	if (!inputs.entry_sent)
		emit(ids, op_id, OP_RECORD_ENTER, stack_id, now, counter);
	push_range(open, ids, PT_REGS_SP(ctx), op_id, OPEN_RANGE_OP);
	return 0;
}

/*
 * Inside an op that takes doubles, at the first branch every run passes once its code has
 * saved them in its frame or in registers (symbolizer/binary/register_spills.h): their words,
 * for the entry record this thread sent a few instructions before.
 */
SEC("uprobe.multi")
int op_spilled_arguments(struct pt_regs *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	__u32 op_id = (__u32)bpf_get_attach_cookie(ctx);
	const struct op_plan *plan = capture_plan(target, ids, op_id);
	if (!plan)
		return 0;
	struct record_with_arguments *record = begin_record(ids, op_id, OP_RECORD_SPILLED_ARGUMENTS, 0,
							    bpf_ktime_get_ns(), SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return 0;
	read_spilled_arguments(ctx, plan, &record->spilled);
	return emit_assembled(ids, record, sizeof(record->spilled));
}

/*
 * An op called from Python through the boxed dispatcher (boxed_operators.bpf.h): a range like an
 * op's, with the op's name in its record, since no op id names it, and the thread's sequence
 * counter at both ends, which say which backward node it made. Its arguments are Python objects,
 * not read.
 */
SEC("uprobe.multi")
int boxed_op_enter(struct pt_regs *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 candidates = 0;
	__u64 definition =
		boxed_operator_definition(PT_REGS_PARM2(ctx), PT_REGS_PARM3(ctx), bpf_get_attach_cookie(ctx), &candidates);
	if (is_record_function_operator(definition))
		return 0;  /* no range: its `ret` finds none open at its frame */
	struct open_range_stack *open = prepare_range_entry(PT_REGS_SP(ctx), ids, now);
	__u64 counter = read_sequence_counter(target);
	__u64 stack_id = capture_python_stack(target, ids);
	struct record_with_arguments *record = begin_record(ids, 0, OP_RECORD_BOXED_OP_ENTER, stack_id, now, counter);
	if (!record)
		return 0;  /* no range opened: its exit would close none in userspace */
	struct boxed_operator *boxed = &record->boxed_operator;
	__builtin_memset(boxed, 0, sizeof(*boxed));
	read_boxed_operator(definition, candidates, boxed);
	emit_assembled(ids, record, sizeof(*boxed));
	push_range(open, ids, PT_REGS_SP(ctx), 0, OPEN_RANGE_BOXED_OP);
	return 0;
}

/* A range like an op's without arguments, its operator the attach cookie; with the thread's
 * Python stack when `with_python_stack`. */
static __always_inline int enter_range_without_arguments(struct pt_regs *ctx, bool with_python_stack)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 op_id = (__u32)bpf_get_attach_cookie(ctx);
	struct open_range_stack *open = prepare_range_entry(PT_REGS_SP(ctx), ids, now);
	__u64 stack_id = with_python_stack ? capture_python_stack(target, ids) : 0;
	emit(ids, op_id, OP_RECORD_ENTER, stack_id, now, SEQUENCE_COUNTER_UNKNOWN);
	push_range(open, ids, PT_REGS_SP(ctx), op_id, OPEN_RANGE_OP);
	return 0;
}

/*
 * A CUDA API entry point (userspace/loader/cuda_api_probes.h), closed at its `ret` like an op:
 * its event shows neither arguments nor a Python stack, so none are read on the target's
 * launch path, and no autograd node is made inside it.
 */
SEC("uprobe.multi")
int api_call_enter(struct pt_regs *ctx)
{
	return enter_range_without_arguments(ctx, false);
}

/*
 * An inductor C++ kernel (symbolizer/dynamo/inductor_kernels.h) probed while the target runs:
 * a range like an op's, closed at its `ret`s, with the Python stack that places it in the
 * generated module's `call` frame. It takes no arguments tprof can name, and makes no autograd
 * node, so neither is read.
 */
SEC("uprobe.multi")
int compiled_kernel_enter(struct pt_regs *ctx)
{
	return enter_range_without_arguments(ctx, true);
}

/* Per target slot: the dynamic loader's notifications since it became a target. ld.so calls
 * _dl_debug_state as a dlopen's objects are about to be mapped and again once they are: when the
 * count moves, userspace looks for new inductor kernel libraries at once
 * (userspace/session/compiled_kernel_watch.h) instead of waiting for its next poll. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TARGET_SLOTS_MAX);
	__type(key, __u32);
	__type(value, __u64);
} libraries_loaded SEC(".maps");

SEC("uprobe.multi")
int library_loaded(struct pt_regs *ctx)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	__u64 *count = bpf_map_lookup_elem(&libraries_loaded, &ids.slot);
	if (count)
		__sync_fetch_and_add(count, 1);
	return 0;
}

/* The `ret` of op `op_id`'s call: rax holds what it returns (the sret pointer for objects). */
static __always_inline void emit_op_return(struct pt_regs *ctx, const struct target_settings *target,
					   struct thread_ids ids, __u32 op_id, __u64 now)
{
	__u64 counter = read_sequence_counter(target);
	const struct op_plan *plan = capture_plan(target, ids, op_id);
	struct record_with_arguments *record = plan && plan->output_read != OUTPUT_NOTHING
		? begin_record(ids, op_id, OP_RECORD_EXIT, 0, now, counter) : NULL;
	if (!record) {
		emit(ids, op_id, OP_RECORD_EXIT, 0, now, counter);
		return;
	}
	read_op_outputs(&target->tensors, PT_REGS_RC(ctx), plan, &record->arguments, &record->pending);
	emit_assembled(ids, record, arguments_size(&record->arguments));
	emit_pending_lists(&target->tensors, ids, op_id, now, &record->pending);
}

/* Every `ret` of the op and autograd functions (several functions may share one). */
SEC("uprobe.multi")
int range_return(struct pt_regs *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct open_range returned;
	if (!pop_returning_range(PT_REGS_SP(ctx), ids, now, &returned))
		return 0;
	if (returned.kind == OPEN_RANGE_OP)
		emit_op_return(ctx, target, ids, returned.op_id, now);
	else if (returned.kind == OPEN_RANGE_BOXED_OP)
		emit(ids, 0, OP_RECORD_BOXED_OP_EXIT, 0, now, read_sequence_counter(target));
	else
		emit_range_exit(&returned, ids, now, RANGE_EXIT_RETURNED);
	return 0;
}

/* libstdc++'s __cxa_begin_catch: a handler begins; what the exception left is closed now. */
SEC("uprobe.multi")
int exception_caught(struct pt_regs *ctx)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	close_unwound_ranges(PT_REGS_SP(ctx), ids, bpf_ktime_get_ns());
	return 0;
}

SEC("perf_event")
int python_sample(void *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target || !target->python.enabled)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 stack_id = walk_python_stack(target, ids, sample_walk_buffer(), true);
	if (!stack_id)
		return 0;
	return emit_sample(ids, stack_id, now, SAMPLE_ON_CPU);
}

/*
 * Python stacks across waits. The sampler sees running threads only, so a thread blocked in
 * sleep, a queue, I/O or a CUDA sync would vanish from the python_function timeline: when a
 * thread of the target blocks, its stack is recorded (SAMPLE_BLOCKED), and when it runs again
 * the same stack is recorded at that moment (SAMPLE_RESUMED), since a Python stack cannot
 * change while its thread is off CPU. A thread that is not a Python thread (torch's intra-op
 * workers) is looked for again at most once a second.
 */
#define NOT_PYTHON_RETRY_NS 1000000000ULL
#define TASK_RUNNING 0

struct off_cpu_state {
	__u64 stack_id;            /* the stack it blocked with; 0: not blocked, or not recorded */
	__u64 not_python_until_ns; /* no Python thread state was found for it: not before this */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct off_cpu_state);
} off_cpu_states SEC(".maps");

/* `prev` is the current task here: its user memory is the one bpf_probe_read_user sees. A
 * voluntary switch never lands inside another of its walks (BPF programs do not sleep), so
 * its op walk buffer is free. */
static __always_inline void record_blocking(struct task_struct *prev)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target || !target->python.enabled)
		return;
	__u64 now = bpf_ktime_get_ns();
	struct off_cpu_state *state =
		bpf_task_storage_get(&off_cpu_states, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!state || now < state->not_python_until_ns)
		return;
	__u64 stack_id = walk_python_stack(target, ids, op_walk_buffer(), false);
	state->stack_id = stack_id;
	if (!stack_id) {
		state->not_python_until_ns = now + NOT_PYTHON_RETRY_NS;
		return;
	}
	emit_sample(ids, stack_id, now, SAMPLE_BLOCKED);
}

static __always_inline void record_resuming(struct task_struct *next)
{
	struct off_cpu_state *state = bpf_task_storage_get(&off_cpu_states, next, 0, 0);
	if (!state || !state->stack_id)
		return;
	struct thread_ids ids = task_thread_ids(next);
	if (recording_target(&ids))
		emit_sample(ids, state->stack_id, bpf_ktime_get_ns(), SAMPLE_RESUMED);
	state->stack_id = 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(python_switch, bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
{
	/* Runs at every switch on the machine: the clock is read only for a target's thread. */
	if (!preempt && prev_state != TASK_RUNNING)
		record_blocking(prev);
	record_resuming(next);
	return 0;
}
