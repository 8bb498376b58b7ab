/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The record ABI shared by the BPF op tracer and the userspace consumer.
 * Included by BPF C (after vmlinux.h, which defines the __uN types) and by C++ (which takes
 * them from <linux/types.h>).
 */
#ifndef TPROF_BPF_OP_RECORD_H
#define TPROF_BPF_OP_RECORD_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

enum op_record_kind {
	OP_RECORD_ENTER = 1,         /* + struct op_arguments (inputs) when shapes are captured */
	OP_RECORD_EXIT = 2,          /* + struct op_arguments (returns) when shapes are captured */
	OP_RECORD_PYTHON_SAMPLE = 3, /* the sampler's look at a thread between ops; op_id unused */
	OP_RECORD_ANNOTATION_ENTER = 4, /* + struct annotation_enter: record_function("name") began */
	OP_RECORD_ANNOTATION_EXIT = 5,  /* + struct annotation_exit */
	OP_RECORD_EVALUATE_ENTER = 6,   /* + struct autograd_node: the engine runs a backward node */
	OP_RECORD_EVALUATE_EXIT = 7,
	OP_RECORD_NODE_ENTER = 8,       /* + struct autograd_node + struct op_arguments (grad inputs) */
	OP_RECORD_NODE_EXIT = 9,
	OP_RECORD_DEVICE_ACTIVITY = 10, /* + struct device_activity (device_activity.h): GPU activity from the
					 * CUPTI library; timestamp_ns is when it reached BPF */
	OP_RECORD_PYTHON_STACK = 11,    /* + struct python_stack (python_stack.h) up to its last frame: a stack the
					 * walker stored under python_stack_id for the first time */
	OP_RECORD_SPILLED_ARGUMENTS = 12, /* + struct spilled_arguments (op_arguments.h): arguments of the op whose
					   * entry this thread recorded last, read where its code stored them */
	OP_RECORD_MORE_ARGUMENTS = 14,    /* + struct op_arguments: arguments OP_ARGUMENTS_MAX.. of the op whose entry
					   * this thread recorded last (its argument i is schema argument
					   * OP_ARGUMENTS_MAX + i) */
	OP_RECORD_LIST_ELEMENTS = 13,     /* + struct list_elements (op_arguments.h) up to its last element: more
					   * elements of a list argument of the entry this thread recorded last */
	OP_RECORD_MEMORY = 15,            /* + struct memory_event: an allocator's block allocated or freed
					   * (--memory); op_id unused */
	OP_RECORD_BOXED_OP_ENTER = 16,    /* + struct boxed_operator: an op called from Python through the boxed
					   * dispatcher (torch.ops.<ns>.<op>.<overload>); op_id unused */
	OP_RECORD_BOXED_OP_EXIT = 17,     /* its end; op_id unused */
	OP_RECORD_RECOMPILE_REASON = 18,  /* + struct recompile_reason: why the compile a wait counter timed
					   * compiled its frame again, sent as the counter stops, before its
					   * OP_RECORD_ANNOTATION_EXIT; op_id unused */
};

/*
 * The head of every record: one op entry or exit, one stack sample, one annotation or
 * autograd event. 40 bytes; the ring buffer adds an 8-byte header. Kinds with a payload append
 * it right after.
 */
struct op_record {
	__u64 timestamp_ns;    /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 python_stack_id; /* key in the python_stacks map; 0: none captured */
	/* Op entries and exits: the thread's autograd sequence counter (at::sequence_number::peek(),
	 * the number the next backward node made there gets); SEQUENCE_COUNTER_UNKNOWN otherwise. */
	__u64 sequence_counter;
	__u32 tid;             /* thread id in tprof's PID namespace (the target's, for a sidecar) */
	__u32 op_id;           /* index into the userspace op table, from the attach cookie */
	__u8 kind;             /* enum op_record_kind */
	__u8 exit_cause;       /* exits: enum range_exit_cause; samples: enum sample_cause; 0 otherwise */
	__u16 abi_version;     /* OP_RECORD_ABI_VERSION of the BPF object that wrote it */
	__u32 tgid;            /* process id in tprof's PID namespace: which target the record is of */
};

/* Raised whenever a record's layout or meaning changes; the consumer drops other versions. */
#define OP_RECORD_ABI_VERSION 11

/* Why a range ended (open_ranges.bpf.h). */
enum range_exit_cause {
	RANGE_EXIT_RETURNED = 0, /* its function executed `ret` */
	RANGE_EXIT_UNWOUND = 1,  /* a C++ exception unwound it; the exit is the catch */
	RANGE_EXIT_INFERRED = 2, /* found gone later on its thread (no ret or catch was seen) */
};

#define SEQUENCE_COUNTER_UNKNOWN (~0ULL)

/* How a stack sample was taken (the exit_cause byte of an OP_RECORD_PYTHON_SAMPLE). */
enum sample_cause {
	SAMPLE_ON_CPU = 0,  /* the sampler found the thread running */
	SAMPLE_BLOCKED = 1, /* the thread went off CPU here, waiting (sleep, a lock, I/O, a CUDA sync) */
	SAMPLE_RESUMED = 2, /* it ran again: the stack it blocked with, which cannot change meanwhile */
};

/* The record layout is ABI between the BPF object and the userspace consumer. */
#ifdef __cplusplus
static_assert(sizeof(struct op_record) == 40, "op_record is 40 bytes");
#else
_Static_assert(sizeof(struct op_record) == 40, "op_record is 40 bytes");
#endif

#define ANNOTATION_NAME_MAX 128
/* Not a RecordScope: a c10::monitor::WaitCounter's start() to stop(), named by its key. */
#define ANNOTATION_SCOPE_WAIT_COUNTER 64

struct annotation_enter {
	__u64 handle;       /* the at::RecordFunction's address: its end() names it again */
	__u32 name_length;  /* the std::string's length (the copy may be cut at ANNOTATION_NAME_MAX) */
	__u32 optimizer_steps; /* Optimizer.step annotations named in the process so far (optimizer_steps map) */
	__u32 scope;        /* the RecordScope: USER_SCOPE (7), record_function(); FUNCTION (0), a range C code names;
	                     * or ANNOTATION_SCOPE_WAIT_COUNTER */
	__u32 reserved;
	char name[ANNOTATION_NAME_MAX];
};

struct annotation_exit {
	__u64 handle;
};

#define RECOMPILE_REASON_MAX 256

/* dynamo's text for the guard that failed, as its `_compile` kept it (recompile_reason_site):
 * "0/0: tensor 'x' size mismatch at index 0. expected 8, actual 16". */
struct recompile_reason {
	__u64 handle;       /* the wait counter's, as in its annotation_enter */
	__u32 length;       /* the str's length (the copy may be cut at RECOMPILE_REASON_MAX - 1) */
	__u32 reserved;
	char text[RECOMPILE_REASON_MAX];
};

#define OPERATOR_NAME_MAX 96
#define OVERLOAD_NAME_MAX 32

/* The operator a boxed call from Python runs, as its c10::OperatorName names it. */
struct boxed_operator {
	__u32 name_length;     /* the std::strings' lengths (the copies may be cut); 0: unreadable */
	__u32 overload_length;
	__u32 candidates;      /* the overloads it is chosen from: 1 for torch.ops.<ns>.<op>.<overload>,
				* more for an overload packet (torch.ops.<ns>.<op>), whose overload is not read */
	__u32 reserved;
	char name[OPERATOR_NAME_MAX];         /* "aten::cos" */
	char overload[OVERLOAD_NAME_MAX];     /* "default" is "" */
};

/* A torch::autograd::Node, as the engine is about to run it. */
struct autograd_node {
	__u64 node;         /* Node* */
	__u64 vptr;         /* its vtable pointer: names the node's class */
	__u64 sequence_nr;  /* Node::sequence_nr_; UINT64_MAX when unknown (or AccumulateGrad's) */
	__u64 thread_id;    /* Node::thread_id_: the forward thread's RecordFunction id; 0 unknown */
};

/* A block of one of torch's allocators. The CPU's: c10::ProfiledCPUMemoryReporter, which
 * DefaultCPUAllocator tells of every block it hands out and takes back, profiler or not; a free's
 * size is not known there, and userspace keeps the addresses it saw allocated, as torch's
 * reporter does. A device's (the CUDA caching allocator): c10::reportMemoryUsageToProfiler,
 * which it calls at every malloc and free with the block's size and its device's totals. */
struct memory_event {
	__u64 address;
	__s64 bytes;           /* the block's size; negative for a device's free; 0 for a CPU free */
	__u64 total_allocated; /* a device's, after the change, as its allocator counts; CPU: 0 */
	__u64 total_reserved;
	__s8 device_type;      /* c10::DeviceType: CPU 0, CUDA 1 */
	__s8 device_index;     /* -1 for the CPU */
	__u8 reserved[6];
};

/* Each target's counters in the per-CPU `loss_counters` array (targets.bpf.h): what could not
 * be recorded, and why. */
enum loss_counter {
	LOSS_RING_BUFFER_FULL = 0,   /* a record was dropped */
	LOSS_STACK_UNREADABLE = 1,   /* a Python stack could not be walked (no walk buffer) */
	LOSS_STACK_NOT_STORED = 2,   /* a walked stack could not be stored in python_stacks */
	LOSS_ARGUMENTS_UNREADABLE = 3, /* an op's arguments could not be captured (no scratch) */
	LOSS_RANGE_NOT_TRACKED = 4,  /* a range nested too deep to track its exit; its parent closes it */
	LOSS_DEVICE_ACTIVITY_UNREADABLE = 5, /* a GPU activity record could not be read (or its ABI differs) */
	LOSS_THREAD_STATE_NOT_FOUND = 6, /* a walk found no PyThreadState of its thread in the interpreter's list */
	LOSS_THREAD_SEARCH_CUT = 7,  /* likewise, but the list went on past PYTHON_MAX_THREAD_STATES */
	LOSS_COUNTER_COUNT = 8,
};

#endif /* TPROF_BPF_OP_RECORD_H */
