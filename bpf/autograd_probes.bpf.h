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

/* Where torch::autograd::Node keeps sequence_nr_ and thread_id_; 0: unknown. */
const volatile __u32 node_sequence_nr_offset = 0;
const volatile __u32 node_thread_id_offset = 0;

static __always_inline void read_node(struct autograd_node *out, __u64 node)
{
	out->node = node;
	out->vptr = read_user_u64(node);
	out->sequence_nr = node_sequence_nr_offset ? read_user_u64(node + node_sequence_nr_offset) : ~0ULL;
	out->thread_id = node_thread_id_offset ? read_user_u64(node + node_thread_id_offset) : 0;
}

/*
 * A record of `kind` for `node`, with the thread's Python stack: the Python frames
 * (loss.backward()) must enclose the engine's ranges. NULL when there is no memory for it.
 */
static __always_inline struct record_with_arguments *begin_node_record(__u8 kind, __u64 node, struct thread_ids ids, __u64 now)
{
	__u64 stack_id = python_config.enabled ? capture_python_stack(ids.tid, op_walk_buffer()) : 0;
	struct record_with_arguments *record =
		begin_record(ids, 0, kind, stack_id, now, SEQUENCE_COUNTER_UNKNOWN);
	if (record)
		read_node(&record->node, node);
	return record;
}

/* Engine::evaluate_function(graph_task, Node* func, inputs, ready_queue): rdx is the node. */
SEC("uprobe.multi")
int evaluate_enter(struct pt_regs *ctx)
{
	if (!recording)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	struct thread_ids ids = current_thread_ids();
	struct open_range_stack *open = prepare_range_entry(PT_REGS_SP(ctx), ids, now);
	struct record_with_arguments *record = begin_node_record(OP_RECORD_EVALUATE_ENTER, PT_REGS_PARM3(ctx), ids, now);
	if (!record)
		return 0;
	emit_assembled(record, sizeof(record->node));
	push_range(open, PT_REGS_SP(ctx), 0, OPEN_RANGE_EVALUATE);
	return 0;
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
	struct thread_ids ids = current_thread_ids();
	struct open_range_stack *open = prepare_range_entry(PT_REGS_SP(ctx), ids, now);
	struct record_with_arguments *record = begin_node_record(OP_RECORD_NODE_ENTER, PT_REGS_PARM2(ctx), ids, now);
	if (!record)
		return 0;
	/* Without shapes the record stops after the node: no inputs were captured. */
	__u32 payload = sizeof(record->node);
	if (tensor_config.enabled) {
		reset_arguments(&record->node_arguments);
		read_tensor_vector(&record->node_arguments, PT_REGS_PARM3(ctx));
		payload += arguments_size(&record->node_arguments);
	}
	emit_assembled(record, payload);
	push_range(open, PT_REGS_SP(ctx), 0, OPEN_RANGE_NODE);
	return 0;
}

#endif /* TPROF_BPF_AUTOGRAD_PROBES_BPF_H */
