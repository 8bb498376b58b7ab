/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * GPU activity as the CUPTI injection library (cupti/) hands it to tprof. The library turns
 * CUPTI's activity records into these fixed-size records and fires the USDT probe
 * `tprof:device_activity(batch, count, abi_version)` once per batch; tprof's BPF program copies
 * each record into the ring buffer behind an op_record head of kind OP_RECORD_DEVICE_ACTIVITY.
 * Fixed size, so that BPF can reserve ring-buffer space for it; CUPTI's own record structs
 * change with every toolkit and never cross this boundary.
 * Included by BPF C (after vmlinux.h) and by C++ (which takes the types from <linux/types.h>).
 */
#ifndef TPROF_BPF_DEVICE_ACTIVITY_H
#define TPROF_BPF_DEVICE_ACTIVITY_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Raised whenever a record's layout or meaning changes; BPF copies only batches of its own
 * version, and counts the rest as lost. */
#define DEVICE_ACTIVITY_ABI_VERSION 4

/* Records per batch (per USDT probe firing). */
#define DEVICE_ACTIVITY_BATCH_MAX 256

enum device_activity_kind {
	DEVICE_ACTIVITY_KERNEL = 1,  /* a kernel ran on a stream */
	DEVICE_ACTIVITY_MEMCPY = 2,  /* a copy ran on a stream */
	DEVICE_ACTIVITY_MEMSET = 3,  /* a memset ran on a stream */
	DEVICE_ACTIVITY_RUNTIME = 4, /* a CUDA runtime API call on a CPU thread */
	DEVICE_ACTIVITY_DRIVER = 5,  /* a CUDA driver API call on a CPU thread */
	DEVICE_ACTIVITY_SYNC = 6,    /* a synchronization: the CPU or a stream waited */
	DEVICE_ACTIVITY_DEVICE = 7,  /* a GPU's properties: a struct device_properties, sent at
				      * every attach before any other record */
	DEVICE_ACTIVITY_DROPPED = 8, /* CUPTI dropped records for want of buffer space; `bytes`
				      * holds how many */
	DEVICE_ACTIVITY_REFUSED = 9, /* the library stays dormant this attach; `bytes` holds
				      * CUPTI's reason (a CUptiResult) */
	DEVICE_ACTIVITY_HANDED_OVER = 10, /* the target's own profiler registered its CUPTI buffers
					   * at `start_ns`: every record before it was sent, none
					   * after it will be this attach */
	DEVICE_ACTIVITY_UNTIMED = 11, /* records CUPTI handed over unfinished, with no time, at a
				       * forced flush, and left out; `bytes` holds how many */
};

/* Times are CLOCK_MONOTONIC ns (the library maps CUPTI's clock to it), as bpf_ktime_get_ns. */
struct device_activity {
	__u8 kind;            /* enum device_activity_kind */
	__u8 copy_kind;       /* memcpy: CUpti_ActivityMemcpyKind; sync: CUpti_ActivitySynchronizationType */
	__u8 source_memory;   /* memcpy: CUpti_ActivityMemoryKind of the source */
	__u8 target_memory;   /* memcpy: of the destination; memset: of the memory set */
	__u32 device;         /* CUDA device index */
	__u32 context;        /* CUDA context id */
	__u32 stream;         /* CUDA stream id; sync: the stream waited for, UINT32_MAX for none */
	__u32 correlation;    /* CUPTI correlation id: a runtime/driver call and what it launched */
	__u32 cbid;           /* runtime/driver: the CUPTI callback id of the function */
	__u64 start_ns;
	__u64 end_ns;
	__u64 bytes;          /* memcpy, memset */
	__u64 name;           /* kernel: the address of its name in the target, which CUPTI keeps for
			       * the process's lifetime; tprof reads it from the target's memory */
	__u32 grid[3];
	__u32 block[3];
	__u32 registers_per_thread;
	__u32 shared_memory;  /* static + dynamic, bytes per block */
	__u32 thread;         /* runtime/driver: CUPTI's thread id, the low half of the caller's pthread_self() */
	__u32 active_blocks_per_sm; /* kernel: how many of its blocks fit on one SM at once, by the
				     * CUDA occupancy calculator; 0 when unknown */
};

/* The properties of one GPU (kind DEVICE_ACTIVITY_DEVICE), as the driver reports them: what
 * Kineto writes as `deviceProperties` and needs for a kernel's occupancy. */
struct device_properties {
	__u8 kind;            /* DEVICE_ACTIVITY_DEVICE */
	__u8 compute_major;
	__u8 compute_minor;
	__u8 reserved0;
	__u32 device;         /* CUDA device index */
	__u64 name;           /* the address of its name in the target, in the library's own
			       * storage, which lives as long as the process */
	__u64 total_global_memory;
	__u32 max_threads_per_block;
	__u32 max_threads_per_multiprocessor;
	__u32 registers_per_block;
	__u32 registers_per_multiprocessor;
	__u32 warp_size;
	__u32 shared_memory_per_block;
	__u32 shared_memory_per_multiprocessor;
	__u32 shared_memory_per_block_optin;
	__u32 multiprocessors;
	__u32 reserved[9];
};

#ifdef __cplusplus
static_assert(sizeof(struct device_activity) == 96, "device_activity is 96 bytes");
static_assert(sizeof(struct device_properties) == sizeof(struct device_activity), "one record size");
#else
_Static_assert(sizeof(struct device_activity) == 96, "device_activity is 96 bytes");
_Static_assert(sizeof(struct device_properties) == sizeof(struct device_activity), "one record size");
#endif

#endif /* TPROF_BPF_DEVICE_ACTIVITY_H */
