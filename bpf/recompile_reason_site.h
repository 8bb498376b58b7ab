/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where dynamo's `_compile` keeps why it compiles a frame again: userspace finds it once a
 * compile's stack has shown it that function's code object (symbolizer/dynamo/
 * recompile_reason_site.h) and stores it per target for the wait counter's stop probe
 * (annotation_probes.bpf.h). Included by BPF C and by C++, like op_record.h.
 */
#ifndef TPROF_BPF_RECOMPILE_REASON_SITE_H
#define TPROF_BPF_RECOMPILE_REASON_SITE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum recompile_reason_flags {
	RECOMPILE_REASON_IN_CELL = 1, /* the slot holds a cell (a nested function reads the local) */
	RECOMPILE_REASON_IN_LIST = 2, /* the local is a list of reasons, one per cached graph: the first is read */
};

struct recompile_reason_site {
	__u64 code;          /* `_compile`'s code object; 0: not found (yet) */
	__u64 slot_tag_mask; /* bits of a frame slot that tag the reference (3.14's _PyStackRef) */
	__u32 local_offset;  /* the local's slot, in bytes from the start of the frame */
	__u32 flags;         /* enum recompile_reason_flags */
	__u32 ascii_data;    /* where a compact ASCII str's characters begin (sizeof(PyASCIIObject)) */
	__u32 reserved;
};

#endif /* TPROF_BPF_RECOMPILE_REASON_SITE_H */
