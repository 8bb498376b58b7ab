// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Op tracer: one uprobe_multi link for the entries and one for the returns of every
 * at::_ops::<op>::call in libtorch_cpu (the attach cookie of each site is its op id), plus a
 * perf-event sampler that looks at the target's Python stacks between ops.
 *
 * Records are submitted with BPF_RB_NO_WAKEUP: a wakeup per record costs ~6 us on the
 * target's thread, while userspace drains the buffer on a timer anyway.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "op_record.h"
#include "python_walker.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* tprof's PID namespace (st_dev, st_ino of /proc/self/ns/pid): ids in records are the ones
 * tprof sees in /proc, which for a sidecar are the target container's. */
const volatile __u64 pid_namespace_device = 0;
const volatile __u64 pid_namespace_inode = 0;
/* The target's pid in that namespace: the sampler fires on every CPU and keeps only these. */
const volatile __u32 target_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by userspace before load */
} op_records SEC(".maps");

struct thread_ids {
	__u32 tgid;
	__u32 tid;
};

static __always_inline struct thread_ids current_thread_ids(void)
{
	struct bpf_pidns_info ids = {};
	if (bpf_get_ns_current_pid_tgid(pid_namespace_device, pid_namespace_inode, &ids, sizeof(ids)))
		return (struct thread_ids){};
	return (struct thread_ids){.tgid = ids.tgid, .tid = ids.pid};
}

static __always_inline int emit(__u32 tid, __u32 op_id, __u8 kind, __u64 python_stack_id, __u64 now)
{
	struct op_record *rec = bpf_ringbuf_reserve(&op_records, sizeof(*rec), 0);
	if (!rec) {
		count_loss(LOSS_RING_BUFFER_FULL);
		return 0;
	}
	rec->timestamp_ns = now;
	rec->python_stack_id = python_stack_id;
	rec->tid = tid;
	rec->op_id = op_id;
	rec->kind = kind;
	__builtin_memset(rec->reserved, 0, sizeof(rec->reserved));
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("uprobe.multi")
int op_enter(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = current_thread_ids().tid;
	__u64 stack_id = python_config.enabled ? capture_python_stack(tid, op_walk_buffer()) : 0;
	return emit(tid, (__u32)bpf_get_attach_cookie(ctx), OP_RECORD_ENTER, stack_id, now);
}

SEC("uretprobe.multi")
int op_exit(struct pt_regs *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	return emit(current_thread_ids().tid, (__u32)bpf_get_attach_cookie(ctx), OP_RECORD_EXIT, 0, now);
}

SEC("perf_event")
int python_sample(void *ctx)
{
	struct thread_ids ids = current_thread_ids();
	if (ids.tgid != target_tgid || !target_tgid)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 stack_id = capture_python_stack(ids.tid, sample_walk_buffer());
	if (!stack_id)
		return 0;
	return emit(ids.tid, 0, OP_RECORD_PYTHON_SAMPLE, stack_id, now);
}
