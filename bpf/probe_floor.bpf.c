// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The benchmark floor: empty programs on the same sites and in the same attach mode as the
 * op tracer. Their cost is the uprobe trap itself, which no tracer can go below.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("uprobe.multi")
int op_enter(void *ctx)
{
	return 0;
}

SEC("uretprobe.multi")
int op_exit(void *ctx)
{
	return 0;
}
