/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The autograd engine's backward work: Engine::evaluate_function around each node it runs,
 * and the node's own apply(), with the node's vtable pointer (its class), sequence number and
 * forward thread, and its gradient inputs. Their exits are the op tracer's range_return.
 */
#ifndef TPROF_BPF_AUTOGRAD_PROBES_BPF_H
#define TPROF_BPF_AUTOGRAD_PROBES_BPF_H

#include "argument_reader.bpf.h"
#include "open_ranges.bpf.h"
#include "record_emitter.bpf.h"

/* sequence_nr_ and thread_id_ where the target's torch::autograd::Node keeps them (offset 0:
 * unknown, not read). */
static __always_inline void read_node(const struct target_settings *target, struct autograd_node *out, __u64 node)
{
	out->node = node;
	out->vptr = read_user_u64(node);
	__u32 sequence_nr_offset = target->node_sequence_nr_offset;
	__u32 thread_id_offset = target->node_thread_id_offset;
	out->sequence_nr = sequence_nr_offset ? read_user_u64(node + sequence_nr_offset) : ~0ULL;
	out->thread_id = thread_id_offset ? read_user_u64(node + thread_id_offset) : 0;
}

/*
 * A record of `kind` for `node`, with the thread's Python stack: the Python frames
 * (loss.backward()) must enclose the engine's ranges. NULL when there is no memory for it.
 */
static __always_inline struct record_with_arguments *begin_node_record(const struct target_settings *target, __u8 kind,
									__u64 node, struct thread_ids ids, __u64 now)
{
	__u64 stack_id = capture_python_stack(target, ids);
	struct record_with_arguments *record = begin_record(ids, 0, kind, stack_id, now, SEQUENCE_COUNTER_UNKNOWN);
	if (record)
		read_node(target, &record->node, node);
	return record;
}

/* Engine::evaluate_function(graph_task, Node* func, inputs, ready_queue): rdx is the node. */
SEC("uprobe.multi")
int evaluate_enter(struct pt_regs *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct open_range_stack *open = prepare_range_entry(PT_REGS_SP(ctx), ids, now);
	struct record_with_arguments *record =
		begin_node_record(target, OP_RECORD_EVALUATE_ENTER, PT_REGS_PARM3(ctx), ids, now);
	if (!record)
		return 0;
	emit_assembled(ids, record, sizeof(record->node));
	push_range(open, ids, PT_REGS_SP(ctx), 0, OPEN_RANGE_EVALUATE);
	return 0;
}

/*
 * std::vector<at::Tensor> <Node subclass>::apply(std::vector<at::Tensor>&& inputs): the
 * returned vector takes rdi (sret), so rsi is the node and rdx its inputs.
 */
SEC("uprobe.multi")
int node_enter(struct pt_regs *ctx)
{
	struct thread_ids ids;
	const struct target_settings *target = current_target(&ids);
	if (!target)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct open_range_stack *open = prepare_range_entry(PT_REGS_SP(ctx), ids, now);
	struct record_with_arguments *record =
		begin_node_record(target, OP_RECORD_NODE_ENTER, PT_REGS_PARM2(ctx), ids, now);
	if (!record)
		return 0;
	/* Without shapes the record stops after the node: no inputs were captured. */
	__u32 payload = sizeof(record->node);
	if (target->tensors.enabled) {
		reset_arguments(&record->node_arguments);
		read_tensor_vector(&target->tensors, &record->node_arguments, PT_REGS_PARM3(ctx));
		payload += arguments_size(&record->node_arguments);
	}
	emit_assembled(ids, record, payload);
	push_range(open, ids, PT_REGS_SP(ctx), 0, OPEN_RANGE_NODE);
	return 0;
}

#endif /* TPROF_BPF_AUTOGRAD_PROBES_BPF_H */
