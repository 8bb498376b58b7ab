/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The argument ABI shared by the BPF op tracer and userspace:
 *  - what userspace tells BPF about each op (where each argument lives under the x86-64
 *    SysV ABI, and how to read it), in the op_plans map keyed by op id;
 *  - how the calibrated c10::TensorImpl layout reaches BPF (read-only data);
 *  - what BPF hands back: raw TensorImpl windows and argument values, appended to an op's
 *    entry record (its inputs) or exit record (its outputs).
 * BPF stays layout-agnostic: it copies bytes, userspace decodes them with the calibrated
 * layout.
 */
#ifndef TPROF_BPF_OP_ARGUMENTS_H
#define TPROF_BPF_OP_ARGUMENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define OP_ARGUMENTS_MAX 16       /* schema arguments (or returns) one record holds */
#define OP_PLAN_ARGUMENTS_MAX 32  /* schema arguments an op's plan describes: past the first OP_ARGUMENTS_MAX,
				   * they follow in an OP_RECORD_MORE_ARGUMENTS record (a power of 2) */
#define OP_TENSORS_MAX 16         /* TensorImpls copied per record (a power of 2) */
#define TENSOR_WINDOW_BYTES 128   /* TensorImpl bytes copied from tensor_layout.window_offset */
#define OUT_OF_LINE_DIMS_MAX 16   /* dims copied for the one tensor with more than 5 */
#define INT_LIST_VALUES_MAX 16    /* int[] elements copied per record, over all int[] arguments */
#define INLINE_DIMS_MAX 5         /* c10::impl::SizesAndStrides keeps up to 5 dims inline */
#define STRING_BYTES_MAX 32       /* bytes of a str argument copied (into int_values: 4 words) */
#define OPTIONAL_TENSOR_LIST_MAX 8 /* elements of a Tensor?[] read, all in its op's record */
#define LIST_ELEMENTS_MAX 1024    /* elements of one list argument read, over its records; beyond, truncated */
#define LIST_CHUNK_TENSORS 8      /* tensors of one list in one OP_RECORD_LIST_ELEMENTS record */
#define LIST_CHUNK_INTS 64        /* ints of one list in one OP_RECORD_LIST_ELEMENTS record */
#define SCALAR_WORDS 4            /* a c10::Scalar's 32 bytes */

/* Where an argument's 8-byte word is at the function's entry. */
enum argument_location_kind {
	LOCATION_NONE = 0,     /* not reachable: passed in an xmm register, or not understood */
	LOCATION_REGISTER = 1, /* index: 0 rdi, 1 rsi, 2 rdx, 3 rcx, 4 r8, 5 r9 */
	LOCATION_STACK = 2,    /* index: 8-byte slot above the return address (0 = rsp+8) */
	/* Stored in the frame by the function's code before its first call (an argument that came
	 * in an xmm register), read at the op's spill probe (OP_RECORD_SPILLED_ARGUMENTS) from rbp or rsp
	 * there plus argument_plan.displacement. Nothing at the entry. */
	LOCATION_FRAME_POINTER_SLOT = 3,
	LOCATION_STACK_POINTER_SLOT = 4,
	/* Likewise moved into a general register: index 0 rax, 1 rbx, 2 rcx, 3 rdx, 4 rsi, 5 rdi,
	 * 6 rbp, 7 rsp, 8-15 r8-r15. */
	LOCATION_SAVED_REGISTER = 5,
};

struct argument_location {
	__u8 kind;  /* enum argument_location_kind */
	__u8 index;
};

/* How BPF reads one argument from its location's word. */
enum argument_read {
	READ_NOTHING = 0,          /* not captured; reported as unknown */
	READ_WORD = 1,             /* the word is the value: int64_t, bool, optional<ScalarType>... */
	READ_POINTED_WORD = 2,     /* the word points at an 8-byte value: c10::SymInt passed by reference */
	READ_TENSOR = 3,           /* the word points at an at::Tensor: its first word is the TensorImpl* */
	READ_OPTIONAL_TENSOR = 4,  /* the word points at an optional<at::Tensor> (tensor_layout's offsets) */
	READ_TENSOR_LIST = 5,      /* ArrayRef<at::Tensor>: word = data, `length` = element count */
	READ_INT_LIST = 6,         /* ArrayRef<int64_t> or ArrayRef<SymInt>: word = data, `length` = count */
	READ_SCALAR = 7,           /* the word points at a c10::Scalar: tag word at 0, payload at 16 */
	READ_OPTIONAL_POINTED_WORD = 8, /* the word points at an optional<SymInt>: laid out as optional<at::Tensor>
					 * (an 8-byte non-trivial payload; tensor_layout's offsets) */
	READ_OPTIONAL_INT_LIST = 9, /* c10::OptionalArrayRef<int64_t or SymInt> of c10's optional: as READ_INT_LIST,
				     * and {nullptr, n != 0} is nullopt */
	READ_STD_OPTIONAL_INT_LIST = 10, /* the same over std::optional, 24 bytes on the stack: data, length,
					  * then the engaged flag in the slot after them */
	READ_OPTIONAL_WORD_PAIR = 12, /* a 16-byte optional<int64_t or double> in two eightbytes, word and `length`:
				       * the flag's and the payload's, in optional<at::Tensor>'s order */
	READ_STRING = 11,          /* a string_view: word = data, `length` = its length (c10's and libstdc++'s
				    * order their two fields differently; the plan says which is where) */
	READ_TENSOR_LIST_REF = 13, /* the word points at a c10::IListRef<at::Tensor> (ITensorListRef): a 16-byte
				    * payload, then its tag (IListRefTag): 0 Unboxed (an ArrayRef<Tensor>),
				    * 1 Boxed (a const c10::List<Tensor>*), 2 Materialized (a const
				    * std::vector<reference_wrapper<const Tensor>>*) */
	READ_OPTIONAL_TENSOR_LIST = 15, /* the word points at a c10::List<optional<at::Tensor>> (Tensor?[], as
					 * index takes): an intrusive_ptr to a ListImpl, whose std::vector<IValue>
					 * follows its intrusive_ptr_target base; each element None or a Tensor */
	READ_STD_OPTIONAL_STRING = 17, /* std::optional<std::string_view>, 24 bytes on the stack: libstdc++'s
					* {size, data} (word = data, `length` = size), then the engaged flag in
					* the slot after the data's */
	READ_SCALAR_LIST = 16,     /* ArrayRef<c10::Scalar>: word = data, `length` = count; every element follows in
				    * OP_RECORD_LIST_ELEMENTS records */
	READ_OPTIONAL_SCALAR = 14, /* the word points at an optional<c10::Scalar>: std::optional keeps the Scalar
				    * at 0 and its flag at 32, c10's its flag at 0 and the Scalar at 16
				    * (tensor_layout.optional_tensor_flag tells which optional the build has) */
};

struct argument_plan {
	__u8 read;                       /* enum argument_read */
	__u8 reserved;
	struct argument_location word;   /* the argument, or an ArrayRef's data pointer */
	struct argument_location length; /* an ArrayRef's length; LOCATION_NONE otherwise */
	__s16 displacement;              /* LOCATION_*_POINTER_SLOT: the slot's offset from its base register */
};

/* How BPF reads an op's returns at its return probe, through rax. */
enum output_read {
	OUTPUT_NOTHING = 0,        /* void, or returns BPF does not read */
	OUTPUT_TENSOR = 1,         /* rax points at an at::Tensor (sret slot, or the Tensor& returned) */
	OUTPUT_TENSOR_TUPLE = 2,   /* rax points at std::tuple<Tensor or int64_t...>: libstdc++ lays it out
				    * last element first, 8 bytes each; output_word_mask marks the ints */
	OUTPUT_TENSOR_REF_TUPLE = 3, /* std::tuple<Tensor&...>: as above, each element a pointer to a Tensor */
	OUTPUT_TENSOR_VECTOR = 4,  /* rax points at std::vector<at::Tensor>: {begin, end, capacity} */
	OUTPUT_SCALAR = 5,         /* rax points at a c10::Scalar (the sret slot): as READ_SCALAR */
};

/* One op's plan: the value type of the op_plans map, keyed by op id. */
struct op_plan {
	__u8 argument_count;  /* schema arguments, in schema order (at most OP_PLAN_ARGUMENTS_MAX described) */
	__u8 output_read;     /* enum output_read */
	__u8 output_count;    /* tuple elements for OUTPUT_TENSOR_TUPLE / _REF_TUPLE */
	__u8 output_word_mask; /* OUTPUT_TENSOR_TUPLE: bit i set when element i is an int64_t, not a Tensor */
	__u8 reserved[4];
	struct argument_plan arguments[OP_PLAN_ARGUMENTS_MAX];
};

/* The calibrated c10::TensorImpl layout BPF needs (read-only data; offsets in bytes). */
struct tensor_layout {
	__u32 enabled;                  /* 0: shapes are not captured */
	__u32 window_offset;            /* sizes_and_strides_: its size_ (dims) word first */
	__u32 window_bytes;             /* bytes copied from there: covers up to device_opt_ */
	__u32 storage_field;            /* TensorImpl::storage_ (StorageImpl*) */
	__u32 storage_data_field;       /* the data pointer inside StorageImpl */
	__u32 optional_tensor_payload;  /* where the Tensor sits inside optional<Tensor> */
	__u32 optional_tensor_flag;     /* its engaged flag (one byte) */
	__u32 reserved;
};

/* One TensorImpl as BPF saw it. */
struct tensor_copy {
	__u64 impl;          /* TensorImpl*; 0: unreadable */
	__u64 storage_data;  /* StorageImpl's data pointer; 0: no storage, or unreadable; STORAGE_DATA_NULL:
			      * a storage whose data pointer is null (a zero-size tensor's) */
	__u8 window[TENSOR_WINDOW_BYTES];
};

enum argument_status {
	ARGUMENT_UNKNOWN = 0,     /* not captured (no plan, xmm, or past OP_PLAN_ARGUMENTS_MAX) */
	ARGUMENT_WORD = 1,        /* `value` holds it */
	ARGUMENT_TENSOR = 2,      /* tensors[first_tensor] */
	ARGUMENT_ABSENT = 3,      /* an optional<Tensor> that is nullopt */
	ARGUMENT_TENSOR_LIST = 4, /* `length` elements; the first `tensor_count` copied from first_tensor; of a
				   * Tensor?[], bit i of `value` set when element i is None (it takes no copy) */
	ARGUMENT_INT_LIST = 5,    /* `length` elements; the first `int_count` in int_values from first_int */
	ARGUMENT_SCALAR = 6,      /* `length` = the Scalar's tag, `value` = its payload word */
	ARGUMENT_UNREADABLE = 7,  /* the plan said where, but the memory could not be read */
	ARGUMENT_STRING = 8,      /* `length` bytes; the first STRING_BYTES_MAX of them in int_values from
				   * first_int, over int_count words */
	ARGUMENT_SCALAR_LIST = 9, /* `length` Scalars, all in the OP_RECORD_LIST_ELEMENTS records that follow */
};

struct argument_value {
	__u8 status;        /* enum argument_status */
	__u8 first_tensor;
	__u8 tensor_count;
	__u8 first_int;
	__u8 int_count;
	__u8 reserved[3];
	__u32 length;
	__u32 reserved2;
	__u64 value;
};

/*
 * OP_RECORD_SPILLED_ARGUMENTS' payload: the words of an op's arguments at LOCATION_*_POINTER_SLOT
 * and LOCATION_SAVED_REGISTER, read at its spill probe, for the entry record its thread sent just before.
 */
struct spilled_arguments {
	__u16 present; /* bit i: words[i] holds argument i */
	__u8 reserved[6];
	__u64 words[OP_ARGUMENTS_MAX];
};

/*
 * OP_RECORD_LIST_ELEMENTS' payload: elements [first, first + count) of list argument `argument` of
 * the entry record its thread sent just before, when the list had more than that record holds.
 * A list's records follow one another, in element order, up to LIST_ELEMENTS_MAX elements.
 */
enum list_elements_kind {
	LIST_OF_TENSORS = 1, /* tensors[count]; a tensor of more than 5 dims has no out-of-line sizes here */
	LIST_OF_INTS = 2,    /* ints[count] */
	LIST_OF_SCALARS = 3, /* count c10::Scalars of 4 words each in ints[]: {tag, -, payload, -} */
};

struct list_elements {
	__u8 argument;
	__u8 kind;   /* enum list_elements_kind */
	__u8 count;
	__u8 reserved;
	__u32 first;
	union {
		__s64 ints[LIST_CHUNK_INTS];
		struct tensor_copy tensors[LIST_CHUNK_TENSORS];
	};
};

/*
 * Appended to an op's entry record (inputs, in schema order) or exit record (returns). The
 * record is cut after tensors[tensor_count], unless a tensor of more than 5 dims was copied:
 * then it is sent whole, out_of_line included. The size tells userspace how much is there.
 */
struct op_arguments {
	__u8 argument_count;
	__u8 tensor_count;
	__u8 int_count;
	__u8 out_of_line_tensor;  /* index of the tensor whose dims are in out_of_line; 0xff: none */
	__u32 reserved;
	struct argument_value arguments[OP_ARGUMENTS_MAX];
	__s64 int_values[INT_LIST_VALUES_MAX];
	struct tensor_copy tensors[OP_TENSORS_MAX];
	__s64 out_of_line[2 * OUT_OF_LINE_DIMS_MAX]; /* sizes, then strides */
};

#define NO_OUT_OF_LINE_TENSOR 0xff

/* No allocation is at address 1: it stands for a null data pointer of a real storage, which
 * torch's ET observer gives a storage id (one, shared by all of them) where no storage has 0. */
#define STORAGE_DATA_NULL 1

#endif /* TPROF_BPF_OP_ARGUMENTS_H */
