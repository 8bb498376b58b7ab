/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reads an op's arguments at its entry probe and its returns at its return probe, following
 * the op's plan (op_arguments.h): where each argument lives under the SysV ABI and how to read
 * it. Tensors are copied as raw TensorImpl windows; userspace decodes them with the layout it
 * calibrated, so nothing here knows the layout beyond the offsets in the target's tensor_layout.
 */
#ifndef TPROF_BPF_ARGUMENT_READER_BPF_H
#define TPROF_BPF_ARGUMENT_READER_BPF_H

#include "op_arguments.h"
#include "op_record.h"

#include "targets.bpf.h"

/* Op ids are each target's own (its library and probes): key (slot << 32) | op id. Userspace
 * fills one plan per probed op of each target recorded with shapes. */
#define OP_PLANS_MAX (1 << 20)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, OP_PLANS_MAX);
	__type(key, __u64);
	__type(value, struct op_plan);
} op_plans SEC(".maps");

/* The plan of op `op_id` of the target in `slot`, or NULL. */
static __always_inline const struct op_plan *op_plan_of(__u32 slot, __u32 op_id)
{
	__u64 key = ((__u64)slot << 32) | op_id;
	return bpf_map_lookup_elem(&op_plans, &key);
}

/*
 * The integer argument registers and the stack pointer at function entry, copied out of
 * pt_regs: the verifier forbids reading the context at a variable offset.
 */
struct entry_registers {
	__u64 words[6]; /* rdi, rsi, rdx, rcx, r8, r9 */
	__u64 stack_pointer;
};

static __always_inline void save_entry_registers(struct pt_regs *regs, struct entry_registers *saved)
{
	saved->words[0] = PT_REGS_PARM1(regs);
	saved->words[1] = PT_REGS_PARM2(regs);
	saved->words[2] = PT_REGS_PARM3(regs);
	saved->words[3] = PT_REGS_PARM4(regs);
	saved->words[4] = PT_REGS_PARM5(regs);
	saved->words[5] = PT_REGS_PARM6(regs);
	saved->stack_pointer = PT_REGS_SP(regs);
}

/* The word at an argument's location; false when it has none or the stack is unreadable. */
static __always_inline bool location_word(const struct entry_registers *registers, struct argument_location where,
					  __u64 *word)
{
	if (where.kind == LOCATION_REGISTER && where.index < 6) {
		*word = registers->words[where.index];
		return true;
	}
	if (where.kind == LOCATION_STACK) {
		/* At function entry rsp points at the return address; slot 0 is just above it. */
		__u64 address = registers->stack_pointer + 8 + 8 * (__u64)where.index;
		return bpf_probe_read_user(word, sizeof(*word), (const void *)address) == 0;
	}
	return false;
}

/* Copies the TensorImpl `impl`'s window and its storage's data pointer into `copy`; false when
 * the impl cannot be read. */
static __always_inline bool copy_tensor_window(const struct tensor_layout *layout, struct tensor_copy *copy, __u64 impl)
{
	__u32 window_bytes = layout->window_bytes;
	if (window_bytes > TENSOR_WINDOW_BYTES)
		window_bytes = TENSOR_WINDOW_BYTES;
	if (!impl || bpf_probe_read_user(copy->window, window_bytes, (const void *)(impl + layout->window_offset)))
		return false;
	copy->impl = impl;
	copy->storage_data = 0;
	__u64 storage = 0;
	if (!bpf_probe_read_user(&storage, sizeof(storage), (const void *)(impl + layout->storage_field)) && storage &&
	    !bpf_probe_read_user(&copy->storage_data, sizeof(copy->storage_data),
				 (const void *)(storage + layout->storage_data_field)) &&
	    !copy->storage_data)
		copy->storage_data = STORAGE_DATA_NULL;
	return true;
}

/*
 * Copies the TensorImpl `impl` into the next free tensor slot. Returns the slot, or -1 when
 * every slot is taken or the impl cannot be read.
 */
__noinline int copy_tensor(const struct tensor_layout *layout, struct op_arguments *args, __u64 impl)
{
	if (!layout || !args)
		return -1;
	__u32 slot = args->tensor_count;
	if (slot >= OP_TENSORS_MAX)
		return -1;
	struct tensor_copy *copy = &args->tensors[slot & (OP_TENSORS_MAX - 1)];
	if (!copy_tensor_window(layout, copy, impl))
		return -1;

	/* More than 5 dims live out of line: sizes then strides, behind the first inline slot. */
	__u64 dims = *(__u64 *)copy->window;
	if (dims > INLINE_DIMS_MAX && dims <= OUT_OF_LINE_DIMS_MAX &&
	    args->out_of_line_tensor == NO_OUT_OF_LINE_TENSOR) {
		__u64 out_of_line = *(__u64 *)(copy->window + 8);
		__u32 bytes = (__u32)(dims * 2 * sizeof(__s64));
		if (bytes > sizeof(args->out_of_line))
			bytes = sizeof(args->out_of_line);
		if (!bpf_probe_read_user(args->out_of_line, bytes, (const void *)out_of_line))
			args->out_of_line_tensor = (__u8)slot;
	}
	args->tensor_count = slot + 1;
	return (int)slot;
}

/* The TensorImpl* inside the at::Tensor at `tensor` (its only member). */
static __always_inline __u64 tensor_impl(__u64 tensor)
{
	__u64 impl = 0;
	if (!tensor || bpf_probe_read_user(&impl, sizeof(impl), (const void *)tensor))
		return 0;
	return impl;
}

static __always_inline void record_tensor(const struct tensor_layout *layout, struct op_arguments *args,
					  struct argument_value *value, __u64 impl)
{
	int slot = copy_tensor(layout, args, impl);
	if (slot < 0) {
		value->status = ARGUMENT_UNREADABLE;
		return;
	}
	value->status = ARGUMENT_TENSOR;
	value->first_tensor = (__u8)slot;
	value->tensor_count = 1;
}

#define TENSOR_LIST_COPIED_MAX 4 /* elements of one Tensor[] copied into its op's record; the rest follow */
#define INT_LIST_COPIED_MAX 8    /* elements of one int[] copied into its op's record; the rest follow */
#define IVALUE_BYTES 16          /* c10::IValue: an 8-byte payload (a Tensor's is its TensorImpl*), then its tag */

/*
 * Where a list argument's elements are: element i at base + stride * i. A tensor element's
 * TensorImpl* is the first word there (an at::Tensor, or an IValue holding one), or with
 * `indirect` the first word of the at::Tensor a pointer there points at (a reference_wrapper).
 */
struct list_source {
	__u64 base;
	__u64 length;
	__u32 first; /* the first element not yet copied */
	__u8 argument;
	__u8 kind;   /* enum list_elements_kind */
	__u8 stride;
	__u8 indirect;
};

/* The lists whose elements did not all fit in their op's record: OP_RECORD_LIST_ELEMENTS
 * records carry the rest (list_elements.bpf.h). */
#define PENDING_LISTS_MAX 4
struct pending_lists {
	__u32 count;
	struct list_source lists[PENDING_LISTS_MAX];
};

static __always_inline void defer_rest(struct pending_lists *pending, const struct list_source *list, __u32 copied)
{
	__u32 index = pending ? pending->count : PENDING_LISTS_MAX;
	if (copied >= list->length || index >= PENDING_LISTS_MAX)
		return;
	pending->lists[index] = *list;
	pending->lists[index].first = copied;
	pending->count = index + 1;
}

static __always_inline __u64 list_tensor_impl(const struct list_source *list, __u64 i)
{
	__u64 element = list->base + list->stride * i;
	if (list->indirect)
		element = tensor_impl(element); /* the at::Tensor's address */
	return tensor_impl(element);
}

__noinline int record_tensor_list(const struct tensor_layout *layout, struct op_arguments *args,
				  struct argument_value *value, const struct list_source *list,
				  struct pending_lists *pending)
{
	if (!args || !value || !list)
		return 0;
	value->status = ARGUMENT_TENSOR_LIST;
	value->length = list->length > 0xffffffffULL ? 0xffffffffU : (__u32)list->length;
	value->first_tensor = args->tensor_count;
	value->tensor_count = 0;
	for (__u32 i = 0; i < TENSOR_LIST_COPIED_MAX; i++) {
		if (i >= list->length)
			break;
		if (copy_tensor(layout, args, list_tensor_impl(list, i)) < 0)
			break;
		value->tensor_count++;
	}
	defer_rest(pending, list, value->tensor_count);
	return 0;
}

/* A std::vector's {begin, end} at `vector`; false when unreadable or not a whole number of
 * `element_bytes` elements. */
static __always_inline bool vector_elements(__u64 vector, __u64 element_bytes, __u64 *begin, __u64 *count)
{
	__u64 bounds[2] = {};
	if (!vector || bpf_probe_read_user(bounds, sizeof(bounds), (const void *)vector) || bounds[1] < bounds[0] ||
	    (bounds[1] - bounds[0]) % element_bytes)
		return false;
	*begin = bounds[0];
	*count = (bounds[1] - bounds[0]) / element_bytes;
	return true;
}

/*
 * The std::vector<IValue> of the c10::List at `list`: a c10::List is an intrusive_ptr to a
 * ListImpl, whose vector follows its intrusive_ptr_target base, which is exactly as long as the
 * offset of TensorImpl::storage_ (TensorImpl's first member after the same base).
 */
static __always_inline bool list_impl_values(const struct tensor_layout *layout, __u64 list, __u64 *begin,
					     __u64 *count)
{
	__u64 impl = tensor_impl(list);
	return impl && vector_elements(impl + layout->storage_field, IVALUE_BYTES, begin, count);
}

/* IListRefTag (c10/core/IListRef.h) */
#define ILISTREF_UNBOXED 0
#define ILISTREF_BOXED 1
#define ILISTREF_MATERIALIZED 2

/* A c10::IListRef<at::Tensor> at `ref`: the elements of whichever list its tag says it holds. */
static __always_inline bool tensor_list_ref_source(const struct tensor_layout *layout, __u64 ref,
						   struct list_source *list)
{
	__u64 words[3] = {}; /* the 16-byte payload union, then the tag */
	if (bpf_probe_read_user(words, sizeof(words), (const void *)ref))
		return false;
	switch ((__u32)words[2]) {
	case ILISTREF_UNBOXED: /* an ArrayRef<at::Tensor> */
		list->base = words[0];
		list->length = words[1];
		return true;
	case ILISTREF_BOXED: /* a const c10::List<at::Tensor>*: IValues, each a Tensor */
		list->stride = IVALUE_BYTES;
		return list_impl_values(layout, words[0], &list->base, &list->length);
	case ILISTREF_MATERIALIZED: /* a std::vector<std::reference_wrapper<const at::Tensor>>* */
		list->indirect = 1;
		return vector_elements(words[0], 8, &list->base, &list->length);
	}
	return false;
}

/* IValue's tags (ATen/core/ivalue.h TORCH_FORALL_TAGS): None first, then Tensor. */
#define IVALUE_TAG_NONE 0
#define IVALUE_TAG_TENSOR 1

/* A Tensor?[] (c10::List<optional<at::Tensor>> at `list`), up to OPTIONAL_TENSOR_LIST_MAX
 * elements, all in the op's record: its Nones as bits of `value`, its tensors copied. */
__noinline int record_optional_tensor_list(const struct tensor_layout *layout, struct op_arguments *args,
					   struct argument_value *value, __u64 list)
{
	__u64 begin = 0, length = 0;
	if (!layout || !args || !value)
		return 0;
	if (!list_impl_values(layout, list, &begin, &length)) {
		value->status = ARGUMENT_UNREADABLE;
		return 0;
	}
	value->status = ARGUMENT_TENSOR_LIST;
	value->length = length > 0xffffffffULL ? 0xffffffffU : (__u32)length;
	value->first_tensor = args->tensor_count;
	value->tensor_count = 0;
	value->value = 0;
	for (__u32 i = 0; i < OPTIONAL_TENSOR_LIST_MAX; i++) {
		__u64 element[2] = {}; /* payload, tag */
		if (i >= length || bpf_probe_read_user(element, sizeof(element), (const void *)(begin + IVALUE_BYTES * i)))
			break;
		if ((__u32)element[1] == IVALUE_TAG_NONE) {
			value->value |= 1ULL << i;
			continue;
		}
		if ((__u32)element[1] != IVALUE_TAG_TENSOR || copy_tensor(layout, args, element[0]) < 0)
			break;
		value->tensor_count++;
	}
	return 0;
}

static __always_inline void record_int_list(struct op_arguments *args, struct argument_value *value,
					    const struct list_source *list, struct pending_lists *pending)
{
	value->status = ARGUMENT_INT_LIST;
	value->length = list->length > 0xffffffffULL ? 0xffffffffU : (__u32)list->length;
	__u32 first = args->int_count;
	value->first_int = (__u8)first;
	value->int_count = 0;
	__u32 count = list->length < INT_LIST_COPIED_MAX ? (__u32)list->length : INT_LIST_COPIED_MAX;
	if (first + count > INT_LIST_VALUES_MAX)
		count = first < INT_LIST_VALUES_MAX ? INT_LIST_VALUES_MAX - first : 0;
	/* int64_t and c10::SymInt elements are both 8 bytes; userspace tells them apart. */
	if (count && first < INT_LIST_VALUES_MAX &&
	    !bpf_probe_read_user(&args->int_values[first & (INT_LIST_VALUES_MAX - 1)],
				 (count & (2 * INT_LIST_COPIED_MAX - 1)) * sizeof(__s64), (const void *)list->base)) {
		value->int_count = (__u8)count;
		args->int_count = (__u8)(first + count);
	}
	defer_rest(pending, list, value->int_count);
}

#define SCALAR_BYTES 32

/*
 * c10::Scalar {Tag tag; union {double; int64_t; c10::complex<double>; ...} v;} at `scalar`: the
 * union holds a complex<double>, aligned to 16, so the payload is at 16, not 8.
 */
static __always_inline void record_scalar(struct argument_value *value, __u64 scalar)
{
	__u64 words[3] = {};
	if (bpf_probe_read_user(words, sizeof(words), (const void *)scalar)) {
		value->status = ARGUMENT_UNREADABLE;
		return;
	}
	value->status = ARGUMENT_SCALAR;
	value->length = (__u32)words[0];
	value->value = words[2];
}

#define STRING_WORDS (STRING_BYTES_MAX / 8)

static __always_inline void record_string(struct op_arguments *args, struct argument_value *value, __u64 data,
					  __u64 length)
{
	value->status = ARGUMENT_STRING;
	value->length = length > 0xffffffffULL ? 0xffffffffU : (__u32)length;
	__u32 first = args->int_count;
	value->first_int = (__u8)first;
	value->int_count = 0;
	if (first > INT_LIST_VALUES_MAX - STRING_WORDS)
		return;
	__u32 bytes = length < STRING_BYTES_MAX ? (__u32)length : STRING_BYTES_MAX;
	if (bpf_probe_read_user(&args->int_values[first], bytes, (const void *)data))
		return;
	value->int_count = STRING_WORDS;
	args->int_count = (__u8)(first + STRING_WORDS);
}

struct argument_walk {
	const struct tensor_layout *layout;
	struct entry_registers registers;
	const struct op_plan *plan;
	struct op_arguments *args;
	struct pending_lists *pending;
	__u32 first; /* the schema argument args->arguments[0] is: 0, or OP_ARGUMENTS_MAX */
};

/*
 * A 24-byte std::optional on the stack (of an ArrayRef or a string_view): its two payload words
 * in the plan's word and `length` slots, its engaged flag in the slot after the later of them.
 * Reads the `length` word; false, with the status set, when the optional is absent or unreadable.
 */
static __always_inline bool std_optional_engaged(const struct entry_registers *registers,
						 const struct argument_plan *plan, __u64 *length,
						 struct argument_value *value)
{
	__u8 last = plan->word.index > plan->length.index ? plan->word.index : plan->length.index;
	struct argument_location flag = {.kind = LOCATION_STACK, .index = (__u8)(last + 1)};
	__u64 engaged = 0;
	if (plan->word.kind != LOCATION_STACK || plan->length.kind != LOCATION_STACK ||
	    !location_word(registers, plan->length, length) || !location_word(registers, flag, &engaged)) {
		value->status = ARGUMENT_UNREADABLE;
		return false;
	}
	if (!(engaged & 0xff)) {
		value->status = ARGUMENT_ABSENT;
		return false;
	}
	return true;
}

/*
 * Reads the argument `plan` describes into args' last argument (args->argument_count - 1).
 * A global function: the verifier checks it once, not at every state the loop around it is in.
 */
__noinline int read_planned_argument(const struct tensor_layout *layout, const struct entry_registers *registers,
				     const struct argument_plan *plan, struct op_arguments *args,
				     struct pending_lists *pending)
{
	if (!layout || !registers || !plan || !args || !args->argument_count)
		return 0;
	__u32 slot = (args->argument_count - 1) & (OP_ARGUMENTS_MAX - 1);
	asm volatile("" : "+r"(slot));
	slot &= OP_ARGUMENTS_MAX - 1;
	struct argument_value *value = &args->arguments[slot];
	__u64 word = 0;
	if (plan->read == READ_NOTHING || !location_word(registers, plan->word, &word))
		return 0; /* ARGUMENT_UNKNOWN */
	__u64 length = 0;
	/* The list's schema argument is filled in by the caller, which knows it. */
	struct list_source list = {.base = word, .kind = LIST_OF_TENSORS, .stride = 8};
	switch (plan->read) {
	case READ_WORD:
		value->status = ARGUMENT_WORD;
		value->value = word;
		break;
	case READ_POINTED_WORD:
		value->status = bpf_probe_read_user(&value->value, sizeof(value->value), (const void *)word)
					? ARGUMENT_UNREADABLE : ARGUMENT_WORD;
		break;
	case READ_TENSOR:
		record_tensor(layout, args, value, tensor_impl(word));
		break;
	case READ_OPTIONAL_TENSOR: {
		__u8 engaged = 0;
		if (bpf_probe_read_user(&engaged, 1, (const void *)(word + layout->optional_tensor_flag))) {
			value->status = ARGUMENT_UNREADABLE;
			break;
		}
		if (!engaged) {
			value->status = ARGUMENT_ABSENT;
			break;
		}
		record_tensor(layout, args, value, tensor_impl(word + layout->optional_tensor_payload));
		break;
	}
	case READ_TENSOR_LIST:
		if (!location_word(registers, plan->length, &list.length))
			break;
		record_tensor_list(layout, args, value, &list, pending);
		break;
	case READ_TENSOR_LIST_REF:
		if (!tensor_list_ref_source(layout, word, &list)) {
			value->status = ARGUMENT_UNREADABLE;
			break;
		}
		record_tensor_list(layout, args, value, &list, pending);
		break;
	case READ_SCALAR_LIST:
		if (!location_word(registers, plan->length, &list.length))
			break;
		list.kind = LIST_OF_SCALARS;
		list.stride = SCALAR_WORDS * 8;
		value->status = ARGUMENT_SCALAR_LIST;
		value->length = list.length > 0xffffffffULL ? 0xffffffffU : (__u32)list.length;
		defer_rest(pending, &list, 0);
		break;
	case READ_OPTIONAL_TENSOR_LIST:
		record_optional_tensor_list(layout, args, value, word);
		break;
	case READ_INT_LIST:
		list.kind = LIST_OF_INTS;
		if (!location_word(registers, plan->length, &list.length))
			break;
		record_int_list(args, value, &list, pending);
		break;
	case READ_OPTIONAL_INT_LIST:
		list.kind = LIST_OF_INTS;
		if (!location_word(registers, plan->length, &list.length))
			break;
		if (!word && list.length) {
			value->status = ARGUMENT_ABSENT;
			break;
		}
		record_int_list(args, value, &list, pending);
		break;
	case READ_STD_OPTIONAL_INT_LIST:
		if (!std_optional_engaged(registers, plan, &length, value))
			break;
		list.kind = LIST_OF_INTS;
		list.length = length;
		record_int_list(args, value, &list, pending);
		break;
	case READ_OPTIONAL_WORD_PAIR: {
		/* `word` is the first eightbyte, `length` the second: the flag is in the one at the
		 * offset optional<at::Tensor> keeps it at. */
		if (!location_word(registers, plan->length, &length))
			break;
		bool flag_first = layout->optional_tensor_flag < 8;
		__u64 flag = flag_first ? word : length;
		value->status = (flag & 0xff) ? ARGUMENT_WORD : ARGUMENT_ABSENT;
		value->value = flag_first ? length : word;
		break;
	}
	case READ_STRING:
		if (!location_word(registers, plan->length, &length))
			break;
		record_string(args, value, word, length);
		break;
	case READ_STD_OPTIONAL_STRING:
		if (std_optional_engaged(registers, plan, &length, value))
			record_string(args, value, word, length);
		break;
	case READ_OPTIONAL_POINTED_WORD: {
		__u8 engaged = 0;
		if (bpf_probe_read_user(&engaged, 1, (const void *)(word + layout->optional_tensor_flag)) ||
		    (engaged && bpf_probe_read_user(&value->value, sizeof(value->value),
						    (const void *)(word + layout->optional_tensor_payload)))) {
			value->status = ARGUMENT_UNREADABLE;
			break;
		}
		value->status = engaged ? ARGUMENT_WORD : ARGUMENT_ABSENT;
		break;
	}
	case READ_SCALAR:
		record_scalar(value, word);
		break;
	case READ_OPTIONAL_SCALAR: {
		bool std_optional = layout->optional_tensor_flag != 0;
		__u8 engaged = 0;
		if (bpf_probe_read_user(&engaged, 1, (const void *)(word + (std_optional ? SCALAR_BYTES : 0)))) {
			value->status = ARGUMENT_UNREADABLE;
			break;
		}
		if (!engaged) {
			value->status = ARGUMENT_ABSENT;
			break;
		}
		record_scalar(value, word + (std_optional ? 0 : 16));
		break;
	}
	}
	return 0;
}

/* bpf_loop's callback: argument `first + index` of the op's plan into args->arguments[index]. */
static long read_argument(__u32 index, void *context)
{
	struct argument_walk *walk = context;
	if (index >= OP_ARGUMENTS_MAX || walk->first + index >= walk->plan->argument_count)
		return 1;
	/* The verifier needs the bound on the register that indexes; keep the compiler from
	 * indexing with an unmasked copy. */
	__u32 slot = index & (OP_ARGUMENTS_MAX - 1);
	asm volatile("" : "+r"(slot));
	slot &= OP_ARGUMENTS_MAX - 1;
	__u32 planned = (walk->first + slot) & (OP_PLAN_ARGUMENTS_MAX - 1);
	asm volatile("" : "+r"(planned));
	planned &= OP_PLAN_ARGUMENTS_MAX - 1;
	const struct argument_plan *plan = &walk->plan->arguments[planned];
	__builtin_memset(&walk->args->arguments[slot], 0, sizeof(walk->args->arguments[slot]));
	walk->args->argument_count = (__u8)(index + 1);
	__u32 deferred = walk->pending->count;
	read_planned_argument(walk->layout, &walk->registers, plan, walk->args, walk->pending);
	if (walk->pending->count > deferred && deferred < PENDING_LISTS_MAX)
		walk->pending->lists[deferred].argument = (__u8)planned;
	return 0;
}

static __always_inline void reset_arguments(struct op_arguments *args)
{
	args->argument_count = 0;
	args->tensor_count = 0;
	args->int_count = 0;
	args->out_of_line_tensor = NO_OUT_OF_LINE_TENSOR;
	args->reserved = 0;
}

/* The op's inputs from schema argument `first` on (0, or OP_ARGUMENTS_MAX for an op's
 * OP_RECORD_MORE_ARGUMENTS), at its entry; `pending` gets the lists with more elements than
 * `args` holds. */
static __always_inline void read_op_inputs(const struct tensor_layout *layout, const struct entry_registers *registers,
					   const struct op_plan *plan, __u32 first, struct op_arguments *args,
					   struct pending_lists *pending)
{
	reset_arguments(args);
	pending->count = 0;
	struct argument_walk walk = {.layout = layout, .registers = *registers, .plan = plan, .args = args,
				     .pending = pending, .first = first};
	bpf_loop(OP_ARGUMENTS_MAX, read_argument, &walk, 0);
}

/*
 * The general registers at the spill probe, in LOCATION_SAVED_REGISTER's numbering, copied out
 * of pt_regs: the verifier forbids reading the context at a variable offset.
 */
struct general_registers {
	__u64 words[16];
};

static __always_inline void save_general_registers(const struct pt_regs *regs, struct general_registers *saved)
{
	saved->words[0] = regs->ax;
	saved->words[1] = regs->bx;
	saved->words[2] = regs->cx;
	saved->words[3] = regs->dx;
	saved->words[4] = regs->si;
	saved->words[5] = regs->di;
	saved->words[6] = regs->bp;
	saved->words[7] = regs->sp;
	saved->words[8] = regs->r8;
	saved->words[9] = regs->r9;
	saved->words[10] = regs->r10;
	saved->words[11] = regs->r11;
	saved->words[12] = regs->r12;
	saved->words[13] = regs->r13;
	saved->words[14] = regs->r14;
	saved->words[15] = regs->r15;
}

/* One argument's word at the spill probe; false when it is not saved there or unreadable. */
static __always_inline bool saved_word(const struct general_registers *registers, const struct argument_plan *argument,
				       __u64 *word)
{
	if (argument->read != READ_WORD)
		return false;
	switch (argument->word.kind) {
	case LOCATION_FRAME_POINTER_SLOT:
		return !bpf_probe_read_user(word, sizeof(*word), (const void *)(registers->words[6] + argument->displacement));
	case LOCATION_STACK_POINTER_SLOT:
		return !bpf_probe_read_user(word, sizeof(*word), (const void *)(registers->words[7] + argument->displacement));
	case LOCATION_SAVED_REGISTER:
		*word = registers->words[argument->word.index & 15];
		return true;
	}
	return false;
}

/*
 * The words of the arguments that the op's entry block saved (they came in xmm registers,
 * which pt_regs lacks), at the probe after it saved them: in the frame, or in a register.
 */
static __always_inline void read_spilled_arguments(const struct pt_regs *regs, const struct op_plan *plan,
						   struct spilled_arguments *spilled)
{
	struct general_registers registers;
	save_general_registers(regs, &registers);
	spilled->present = 0;
	for (__u32 i = 0; i < OP_ARGUMENTS_MAX; i++) {
		spilled->words[i] = 0;
		if (i < plan->argument_count && saved_word(&registers, &plan->arguments[i], &spilled->words[i]))
			spilled->present |= (__u16)(1u << i);
	}
}

/* Each element of a std::vector<at::Tensor> as an argument of its own (autograd node inputs). */
static __always_inline void read_tensor_vector(const struct tensor_layout *layout, struct op_arguments *args,
					       __u64 vector)
{
	__u64 bounds[2] = {};
	if (!vector || bpf_probe_read_user(bounds, sizeof(bounds), (const void *)vector))
		return;
	__u64 count = (bounds[1] - bounds[0]) / 8;
	for (__u32 i = 0; i < OP_TENSORS_MAX; i++) {
		if (i >= count)
			break;
		struct argument_value *value = &args->arguments[i & (OP_ARGUMENTS_MAX - 1)];
		__builtin_memset(value, 0, sizeof(*value));
		args->argument_count = (__u8)(i + 1);
		record_tensor(layout, args, value, tensor_impl(bounds[0] + 8 * (__u64)i));
	}
}

/* The op's returns, at its return probe: `result` is rax; `pending` as for read_op_inputs. */
static __always_inline void read_op_outputs(const struct tensor_layout *layout, __u64 result,
					    const struct op_plan *plan, struct op_arguments *args,
					    struct pending_lists *pending)
{
	reset_arguments(args);
	pending->count = 0;
	switch (plan->output_read) {
	case OUTPUT_TENSOR:
		args->argument_count = 1;
		__builtin_memset(&args->arguments[0], 0, sizeof(args->arguments[0]));
		record_tensor(layout, args, &args->arguments[0], tensor_impl(result));
		break;
	case OUTPUT_TENSOR_TUPLE:
	case OUTPUT_TENSOR_REF_TUPLE: {
		__u8 count = plan->output_count;
		for (__u32 i = 0; i < OP_TENSORS_MAX; i++) {
			if (i >= count)
				break;
			/* libstdc++'s std::tuple stores its last element first. */
			__u64 element = result + 8 * (__u64)(count - 1 - i);
			if (plan->output_read == OUTPUT_TENSOR_REF_TUPLE)
				element = tensor_impl(element); /* the element is a Tensor& (a pointer) */
			struct argument_value *value = &args->arguments[i & (OP_ARGUMENTS_MAX - 1)];
			__builtin_memset(value, 0, sizeof(*value));
			args->argument_count = (__u8)(i + 1);
			if ((plan->output_word_mask >> i) & 1) {
				value->status = bpf_probe_read_user(&value->value, sizeof(value->value), (const void *)element)
					? ARGUMENT_UNREADABLE : ARGUMENT_WORD;
				continue;
			}
			record_tensor(layout, args, value, tensor_impl(element));
		}
		break;
	}
	case OUTPUT_SCALAR:
		args->argument_count = 1;
		__builtin_memset(&args->arguments[0], 0, sizeof(args->arguments[0]));
		record_scalar(&args->arguments[0], result);
		break;
	case OUTPUT_TENSOR_VECTOR: {
		struct list_source list = {.kind = LIST_OF_TENSORS, .stride = 8};
		if (!vector_elements(result, 8, &list.base, &list.length))
			break;
		args->argument_count = 1;
		__builtin_memset(&args->arguments[0], 0, sizeof(args->arguments[0]));
		record_tensor_list(layout, args, &args->arguments[0], &list, pending);
		break;
	}
	}
}

/* Bytes of `args` worth sending: everything up to the last tensor copied, or all of it when a
 * tensor's dims are out of line (rare: more than 5 dims). */
static __always_inline __u32 arguments_size(const struct op_arguments *args)
{
	if (args->out_of_line_tensor != NO_OUT_OF_LINE_TENSOR)
		return sizeof(*args);
	__u32 tensors = args->tensor_count;
	if (tensors > OP_TENSORS_MAX)
		tensors = OP_TENSORS_MAX;
	return (__u32)__builtin_offsetof(struct op_arguments, tensors) + tensors * (__u32)sizeof(struct tensor_copy);
}

#endif /* TPROF_BPF_ARGUMENT_READER_BPF_H */
