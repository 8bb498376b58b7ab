// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Op tracer: one uprobe_multi link for the entries and one for the returns of every
 * at::_ops::<op>::call in libtorch_cpu. The attach cookie of each site is its op id.
 *
 * Records are submitted with BPF_RB_NO_WAKEUP: a wakeup per record costs ~6 us on the
 * target's thread, while userspace drains the buffer on a timer anyway.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "op_record.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 << 20); /* resized by userspace before load */
} op_records SEC(".maps");

/* Reservation failures (ring buffer full), counted so that no loss is silent. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} dropped_records SEC(".maps");

static __always_inline int emit(void *ctx, __u8 kind)
{
	__u64 now = bpf_ktime_get_ns();
	struct op_record *rec = bpf_ringbuf_reserve(&op_records, sizeof(*rec), 0);
	if (!rec) {
		__u32 slot = DROPPED_RECORDS_SLOT;
		__u64 *dropped = bpf_map_lookup_elem(&dropped_records, &slot);
		if (dropped)
			*dropped += 1;
		return 0;
	}
	rec->timestamp_ns = now;
	rec->tid = (__u32)bpf_get_current_pid_tgid();
	rec->op_id = (__u32)bpf_get_attach_cookie(ctx);
	rec->kind = kind;
	__builtin_memset(rec->reserved, 0, sizeof(rec->reserved));
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("uprobe.multi")
int op_enter(struct pt_regs *ctx)
{
	return emit(ctx, OP_RECORD_ENTER);
}

SEC("uretprobe.multi")
int op_exit(struct pt_regs *ctx)
{
	return emit(ctx, OP_RECORD_EXIT);
}
