/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * GPU activity from the CUPTI injection library (cupti/): the USDT probe
 * `tprof:device_activity(batch, count, abi_version)` hands over a batch of fixed device_activity
 * records in the target's memory; each is copied into the ring buffer behind an op_record head
 * of kind OP_RECORD_DEVICE_ACTIVITY. Attaching this program is also what wakes the library: the
 * probe's semaphore counts the attached uprobes.
 */
#ifndef TPROF_BPF_DEVICE_ACTIVITY_PROBES_BPF_H
#define TPROF_BPF_DEVICE_ACTIVITY_PROBES_BPF_H

#include <bpf/usdt.bpf.h>

#include "device_activity.h"
#include "op_record.h"
#include "record_emitter.bpf.h"

struct device_activity_record {
	struct op_record head;
	struct device_activity activity;
};

struct device_batch {
	const struct device_activity *records;
	struct thread_ids ids;
	__u64 now;
};

static long copy_device_activity(__u64 index, void *context)
{
	struct device_batch *batch = context;
	struct device_activity_record *record = bpf_ringbuf_reserve(&op_records, sizeof(*record), 0);
	if (!record) {
		count_loss(batch->ids.slot, LOSS_RING_BUFFER_FULL);
		return 0;
	}
	fill_head(&record->head, batch->ids, 0, OP_RECORD_DEVICE_ACTIVITY, 0, batch->now, SEQUENCE_COUNTER_UNKNOWN);
	if (bpf_probe_read_user(&record->activity, sizeof(record->activity), &batch->records[index])) {
		bpf_ringbuf_discard(record, BPF_RB_NO_WAKEUP);
		count_loss(batch->ids.slot, LOSS_DEVICE_ACTIVITY_UNREADABLE);
		return 0;
	}
	bpf_ringbuf_submit(record, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("usdt")
int BPF_USDT(device_activity_batch, const struct device_activity *records, __u32 count, __s32 abi_version)
{
	struct thread_ids ids;
	if (!current_target(&ids))
		return 0;
	if (abi_version != DEVICE_ACTIVITY_ABI_VERSION || count > DEVICE_ACTIVITY_BATCH_MAX) {
		count_loss(ids.slot, LOSS_DEVICE_ACTIVITY_UNREADABLE);
		return 0;
	}
	struct device_batch batch = {.records = records, .ids = ids, .now = bpf_ktime_get_ns()};
	bpf_loop(count, copy_device_activity, &batch, 0);
	return 0;
}

#endif /* TPROF_BPF_DEVICE_ACTIVITY_PROBES_BPF_H */
