/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the op tracer knows of each target process, shared by the BPF programs and userspace.
 * One BPF object serves every target of a session: the probes of all of them run the same
 * programs, which find the calling process's settings by its pid (targets.bpf.h), since two
 * targets may run different Pythons and torches, and each has its own address space.
 */
#ifndef TPROF_BPF_TARGET_SETTINGS_H
#define TPROF_BPF_TARGET_SETTINGS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "op_arguments.h"
#include "python_stack.h"

/* Targets one session records at once: slots are not reused within a session. */
#define TARGET_SLOTS_MAX 256

struct target_settings {
	struct python_walker_config python; /* enabled == 0: no Python stacks */
	struct tensor_layout tensors;        /* enabled == 0: ops are recorded without arguments */
	/* The thread's autograd sequence counter: the target's address of the {module id, offset}
	 * pair the dynamic linker stores for libtorch's __tls_get_addr call (0: not located), and
	 * the counter's offset from that TLS variable. Read by the probes rather than by tprof at
	 * attach: a process held at libtorch's load has not had it relocated yet. */
	__u64 sequence_counter_tls_index;
	__u64 sequence_counter_field_offset;
	/* Where torch::autograd::Node keeps sequence_nr_ and thread_id_; 0: unknown, not read. */
	__u32 node_sequence_nr_offset;
	__u32 node_thread_id_offset;
	/*
	 * Set by userspace once every probe of the target is attached and cleared before any is
	 * removed: links go one at a time (a uprobe's removal waits for readers, ~0.1 s each), and
	 * a probe that outlived its partners would record entries without exits, or backward
	 * nodes without their ops.
	 */
	__u32 recording;
	__u32 slot; /* its index in target_settings, and in the loss counters */
};

#endif /* TPROF_BPF_TARGET_SETTINGS_H */
