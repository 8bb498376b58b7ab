// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Each thread of one process (the iterator link names it) with the low half of its FS base, so
 * that tprof can name the OS thread of the CUDA API calls CUPTI reports: CUPTI's thread id is
 * the low 32 bits of pthread_self(), which is the FS base. Read from the kernel's task, never
 * from the target. The base is saved at each context switch and set once per thread (at clone,
 * or by the loader for the main thread), so a running thread's saved value is its own.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "thread_base.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("iter/task")
int thread_bases(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	struct thread_base entry = {};

	if (!task)
		return 0;
	entry.tid = BPF_CORE_READ(task, pid);
	entry.fs_base_low = (__u32)BPF_CORE_READ(task, thread.fsbase);
	bpf_seq_write(ctx->meta->seq, &entry, sizeof(entry));
	return 0;
}
