// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Op tracer: one uprobe_multi link for the entries and one for the returns of every
 * at::_ops::<op>::call in libtorch_cpu (the attach cookie of each site is its op id), plus a
 * perf-event sampler that looks at the target's Python stacks between ops. With shapes on,
 * op records carry the op's arguments and returns (argument_reader.bpf.h).
 *
 * It also records what torch's RecordFunction would show besides ops: record_function()
 * ranges (user annotations) and the autograd engine's backward nodes.
 *
 * Records are submitted with BPF_RB_NO_WAKEUP: a wakeup per record costs ~6 us on the
 * target's thread, while userspace drains the buffer on a timer anyway.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "argument_reader.bpf.h"
#include "op_record.h"
#include "python_walker.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* tprof's PID namespace (st_dev, st_ino of /proc/self/ns/pid): ids in records are the ones
 * tprof sees in /proc, which for a sidecar are the target container's. */
const volatile __u64 pid_namespace_device = 0;
const volatile __u64 pid_namespace_inode = 0;
/* The target's pid in that namespace: the sampler fires on every CPU and keeps only these. */
const volatile __u32 target_tgid = 0;
/*
 * Set by userspace once every probe is attached and cleared before any is removed: links go
 * one at a time (a uprobe's removal waits for readers, ~0.1 s each), and a probe that outlived
 * its partners would record entries without exits, or backward nodes without their ops.
 */
volatile __u32 recording = 0;

/*
 * The thread's autograd sequence counter is in libtorch's TLS block of module
 * `sequence_counter_module` (0: not located), at `sequence_counter_offset`.
 */
const volatile __u64 sequence_counter_module = 0;
const volatile __u64 sequence_counter_offset = 0;

/* Where torch::autograd::Node keeps sequence_nr_ and thread_id_; 0: unknown. */
const volatile __u32 node_sequence_nr_offset = 0;
const volatile __u32 node_thread_id_offset = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by userspace before load */
} op_records SEC(".maps");

struct thread_ids {
	__u32 tgid;
	__u32 tid;
};

/* A record being assembled: its head, then its payload (at most one of the two kinds). */
struct record_with_arguments {
	struct op_record head;
	union {
		struct op_arguments arguments;
		struct annotation_enter annotation_enter;
		struct annotation_exit annotation_exit;
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

static __always_inline struct thread_ids current_thread_ids(void)
{
	struct bpf_pidns_info ids = {};
	if (bpf_get_ns_current_pid_tgid(pid_namespace_device, pid_namespace_inode, &ids, sizeof(ids)))
		return (struct thread_ids){};
	return (struct thread_ids){.tgid = ids.tgid, .tid = ids.pid};
}

static __always_inline void fill_head(struct op_record *head, __u32 tid, __u32 op_id, __u8 kind,
				      __u64 python_stack_id, __u64 now, __u64 sequence_counter)
{
	head->timestamp_ns = now;
	head->python_stack_id = python_stack_id;
	head->sequence_counter = sequence_counter;
	head->tid = tid;
	head->op_id = op_id;
	head->kind = kind;
	__builtin_memset(head->reserved, 0, sizeof(head->reserved));
}

/* A record without payload. */
static __always_inline int emit(__u32 tid, __u32 op_id, __u8 kind, __u64 python_stack_id, __u64 now,
				__u64 sequence_counter)
{
	struct op_record *rec = bpf_ringbuf_reserve(&op_records, sizeof(*rec), 0);
	if (!rec) {
		count_loss(LOSS_RING_BUFFER_FULL);
		return 0;
	}
	fill_head(rec, tid, op_id, kind, python_stack_id, now, sequence_counter);
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
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
static __always_inline struct record_with_arguments *begin_record(__u32 tid, __u32 op_id, __u8 kind,
								  __u64 python_stack_id, __u64 now,
								  __u64 sequence_counter)
{
	struct record_with_arguments *record = record_buffer();
	if (!record) {
		count_loss(LOSS_ARGUMENTS_UNREADABLE);
		return NULL;
	}
	fill_head(&record->head, tid, op_id, kind, python_stack_id, now, sequence_counter);
	return record;
}

/*
 * at::sequence_number::peek() of the current thread, as __tls_get_addr would find it: the
 * thread's DTV (tcbhead_t.dtv, at fsbase + 8) holds each module's TLS block, 16 bytes per
 * entry. SEQUENCE_COUNTER_UNKNOWN when not located, or the block is not allocated yet.
 */
static __always_inline __u64 read_sequence_counter(void)
{
	if (!sequence_counter_module)
		return SEQUENCE_COUNTER_UNKNOWN;
	struct task_struct *task = bpf_get_current_task_btf();
	__u64 dtv = read_user_u64(task->thread.fsbase + 8);
	__u64 block = dtv ? read_user_u64(dtv + 16 * sequence_counter_module) : 0;
	__u64 counter = 0;
	if (!block || block == ~0ULL ||
	    bpf_probe_read_user(&counter, sizeof(counter), (const void *)(block + sequence_counter_offset)))
		return SEQUENCE_COUNTER_UNKNOWN;
	return counter;
}

/* The op's plan when its arguments are to be captured, else NULL. */
static __always_inline const struct op_plan *capture_plan(__u32 op_id)
{
	if (!tensor_config.enabled)
		return NULL;
	return bpf_map_lookup_elem(&op_plans, &op_id);
}

SEC("uprobe.multi")
int op_enter(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = current_thread_ids().tid;
	__u32 op_id = (__u32)bpf_get_attach_cookie(ctx);
	__u64 counter = read_sequence_counter();
	__u64 stack_id = python_config.enabled ? capture_python_stack(tid, op_walk_buffer()) : 0;
	const struct op_plan *plan = capture_plan(op_id);
	if (!plan)
		return emit(tid, op_id, OP_RECORD_ENTER, stack_id, now, counter);
	struct record_with_arguments *record = begin_record(tid, op_id, OP_RECORD_ENTER, stack_id, now, counter);
	if (!record)
		return emit(tid, op_id, OP_RECORD_ENTER, stack_id, now, counter);
	read_op_inputs(ctx, plan, &record->arguments);
	return emit_assembled(record, arguments_size(&record->arguments));
}

SEC("uretprobe.multi")
int op_exit(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = current_thread_ids().tid;
	__u32 op_id = (__u32)bpf_get_attach_cookie(ctx);
	__u64 counter = read_sequence_counter();
	const struct op_plan *plan = capture_plan(op_id);
	if (!plan || plan->output_read == OUTPUT_NOTHING)
		return emit(tid, op_id, OP_RECORD_EXIT, 0, now, counter);
	struct record_with_arguments *record = begin_record(tid, op_id, OP_RECORD_EXIT, 0, now, counter);
	if (!record)
		return emit(tid, op_id, OP_RECORD_EXIT, 0, now, counter);
	read_op_outputs(PT_REGS_RC(ctx), plan, &record->arguments);
	return emit_assembled(record, arguments_size(&record->arguments));
}

/* ---- record_function() ranges ---------------------------------------------------------- */

/* The name handed to a record_function kernel, kept until it constructs its RecordFunction. */
struct pending_annotation {
	__u32 name_length;
	char name[ANNOTATION_NAME_MAX];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32); /* tid */
	__type(value, struct pending_annotation);
} pending_annotations SEC(".maps");

/* RecordFunctions of open annotations: their end() closes the range; other end()s are ignored. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __u32);
} open_annotations SEC(".maps");

#define RECORD_SCOPE_USER 7 /* at::RecordScope::USER_SCOPE */

/* The record_function kernels: rsi is `const std::string& name` ({char* data; size_t length}). */
SEC("uprobe.multi")
int annotation_name(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	__u32 tid = current_thread_ids().tid;
	__u64 string[2] = {};
	if (bpf_probe_read_user(string, sizeof(string), (const void *)PT_REGS_PARM2(ctx)))
		return 0;
	struct pending_annotation pending = {};
	pending.name_length = (__u32)string[1];
	__u32 copied = string[1] < ANNOTATION_NAME_MAX - 1 ? (__u32)string[1] : ANNOTATION_NAME_MAX - 1;
	if (bpf_probe_read_user(pending.name, copied & (ANNOTATION_NAME_MAX - 1), (const void *)string[0]))
		return 0;
	bpf_map_update_elem(&pending_annotations, &tid, &pending, BPF_ANY);
	return 0;
}

/* RecordFunction::RecordFunction(RecordScope): a kernel that just named an annotation builds it. */
SEC("uprobe")
int annotation_begin(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	if (PT_REGS_PARM2(ctx) != RECORD_SCOPE_USER)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = current_thread_ids().tid;
	struct pending_annotation *pending = bpf_map_lookup_elem(&pending_annotations, &tid);
	if (!pending)
		return 0;
	__u64 stack_id = python_config.enabled ? capture_python_stack(tid, op_walk_buffer()) : 0;
	struct record_with_arguments *record = begin_record(tid, 0, OP_RECORD_ANNOTATION_ENTER, stack_id, now,
			SEQUENCE_COUNTER_UNKNOWN);
	if (!record) {
		bpf_map_delete_elem(&pending_annotations, &tid);
		return 0;
	}
	struct annotation_enter *enter = &record->annotation_enter;
	enter->handle = PT_REGS_PARM1(ctx);
	enter->name_length = pending->name_length;
	enter->reserved = 0;
	__builtin_memcpy(enter->name, pending->name, sizeof(enter->name));
	bpf_map_delete_elem(&pending_annotations, &tid);
	__u32 one = 1;
	bpf_map_update_elem(&open_annotations, &enter->handle, &one, BPF_ANY);
	return emit_assembled(record, sizeof(*enter));
}

/* RecordFunction::end(): closes an open annotation (also runs for every other RecordFunction). */
SEC("uprobe")
int annotation_end(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	__u64 handle = PT_REGS_PARM1(ctx);
	if (!bpf_map_lookup_elem(&open_annotations, &handle))
		return 0;
	bpf_map_delete_elem(&open_annotations, &handle);
	__u64 now = bpf_ktime_get_ns();
	struct record_with_arguments *record =
		begin_record(current_thread_ids().tid, 0, OP_RECORD_ANNOTATION_EXIT, 0, now,
				SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return 0;
	struct annotation_exit *exit = &record->annotation_exit;
	exit->handle = handle;
	return emit_assembled(record, sizeof(*exit));
}

/* ---- autograd ----------------------------------------------------------------------------- */

static __always_inline void read_node(struct autograd_node *out, __u64 node)
{
	out->node = node;
	out->vptr = read_user_u64(node);
	out->sequence_nr = node_sequence_nr_offset ? read_user_u64(node + node_sequence_nr_offset) : ~0ULL;
	out->thread_id = node_thread_id_offset ? read_user_u64(node + node_thread_id_offset) : 0;
}

/* Engine::evaluate_function(graph_task, Node* func, inputs, ready_queue): rdx is the node. */
SEC("uprobe")
int evaluate_enter(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = current_thread_ids().tid;
	/* Stacks here too: the Python frames (loss.backward()) must enclose the engine's ranges. */
	__u64 stack_id = python_config.enabled ? capture_python_stack(tid, op_walk_buffer()) : 0;
	struct record_with_arguments *record = begin_record(tid, 0, OP_RECORD_EVALUATE_ENTER, stack_id, now,
			SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return 0;
	read_node(&record->node, PT_REGS_PARM3(ctx));
	return emit_assembled(record, sizeof(record->node));
}

SEC("uretprobe")
int evaluate_exit(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	return emit(current_thread_ids().tid, 0, OP_RECORD_EVALUATE_EXIT, 0, bpf_ktime_get_ns(),
			SEQUENCE_COUNTER_UNKNOWN);
}

/*
 * std::vector<at::Tensor> <Node subclass>::apply(std::vector<at::Tensor>&& inputs): the
 * returned vector takes rdi (sret), so rsi is the node and rdx its inputs.
 */
SEC("uprobe.multi")
int node_enter(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = current_thread_ids().tid;
	__u64 stack_id = python_config.enabled ? capture_python_stack(tid, op_walk_buffer()) : 0;
	struct record_with_arguments *record = begin_record(tid, 0, OP_RECORD_NODE_ENTER, stack_id, now,
			SEQUENCE_COUNTER_UNKNOWN);
	if (!record)
		return 0;
	read_node(&record->node, PT_REGS_PARM2(ctx));
	reset_arguments(&record->node_arguments);
	if (tensor_config.enabled)
		read_tensor_vector(&record->node_arguments, PT_REGS_PARM3(ctx));
	return emit_assembled(record, sizeof(record->node) + arguments_size(&record->node_arguments));
}

SEC("uretprobe.multi")
int node_exit(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	return emit(current_thread_ids().tid, 0, OP_RECORD_NODE_EXIT, 0, bpf_ktime_get_ns(),
			SEQUENCE_COUNTER_UNKNOWN);
}

SEC("perf_event")
int python_sample(void *ctx)
{
	if (!recording)
		return 0;
	struct thread_ids ids = current_thread_ids();
	if (ids.tgid != target_tgid || !target_tgid)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 stack_id = capture_python_stack(ids.tid, sample_walk_buffer());
	if (!stack_id)
		return 0;
	return emit(ids.tid, 0, OP_RECORD_PYTHON_SAMPLE, stack_id, now, SEQUENCE_COUNTER_UNKNOWN);
}
