// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The benchmark floor: empty programs on the same sites and in the same attach mode as the
 * op tracer (op entries, their `ret` instructions, __cxa_begin_catch, and with --memory the
 * allocators' reports). Their cost is the
 * uprobe traps themselves, which no tracer on these sites can go below.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("uprobe.multi")
int op_enter(void *ctx)
{
	return 0;
}

SEC("uprobe.multi")
int op_return(void *ctx)
{
	return 0;
}

SEC("uprobe.multi")
int exception_caught(void *ctx)
{
	return 0;
}

/* --memory's sites: the allocators' reports (userspace/loader/memory_probes.h). */
SEC("uprobe.multi")
int memory_report(void *ctx)
{
	return 0;
}

/* The stack sampler's floor: a perf event's interrupt with nothing done in it. */
SEC("perf_event")
int sample(void *ctx)
{
	return 0;
}
