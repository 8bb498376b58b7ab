/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Ops called from Python through the boxed dispatcher: torch.ops.<ns>.<op>.<overload>(...), as
 * aot_eager's FX interpreter, AOTAutograd's backward and inductor's fallback kernels call them.
 * They reach their kernels by callBoxed, never through at::_ops::<op>::call, so no op probe
 * sees them. Every one passes libtorch_python's torch::jit::invokeOperatorFromPython (or, on
 * torch 2.14, the local copy it calls: symbolizer/aten/boxed_call_site.h), which takes the
 * overloads the call may run as std::shared_ptr<torch::jit::Operator>s. Their name is read from
 * the first one:
 *   Operator: variant<C10Operator, JitOnlyOperator>, C10Operator first, and its first member
 *     the c10::OperatorHandle, whose first member is the Dispatcher::OperatorDef*;
 *   OperatorDef: its first member the OperatorEntry, whose first member is its
 *     c10::OperatorName {std::string name; std::string overload_name}.
 * The same on torch 1.13, 2.6 and 2.14 (c10/core/dispatch/Dispatcher.h, OperatorEntry.h).
 */
#ifndef TPROF_BPF_BOXED_OPERATORS_BPF_H
#define TPROF_BPF_BOXED_OPERATORS_BPF_H

#include "op_record.h"
#include "python_walker.bpf.h"

/* How the probed function takes the overloads (its attach cookie). */
#define BOXED_OPERATORS_VECTOR 0 /* rsi: const std::vector<std::shared_ptr<Operator>>& */
#define BOXED_OPERATORS_SPAN 1   /* rsi: that vector's begin, rdx: its size (2.14's local copy) */

#define SHARED_POINTER_BYTES 16  /* std::shared_ptr: {T*, control block*} */
#define OPERATOR_NAME_OVERLOAD_OFFSET 32 /* sizeof(std::string) */

/* Copies a std::string {char* data; size_t length; ...} at `string` into `out` (cut to
 * `capacity` - 1 bytes, NUL-terminated); its whole length, or 0 when it cannot be read. */
static __always_inline __u32 read_std_string(__u64 string, char *out, __u32 capacity)
{
	__u64 fields[2] = {};
	if (bpf_probe_read_user(fields, sizeof(fields), (const void *)string))
		return 0;
	if (fields[1] == 0 || bpf_probe_read_user_str(out, capacity, (const void *)fields[0]) <= 0)
		return 0;
	return (__u32)fields[1];
}

/* The first overload's Dispatcher::OperatorDef (0 when unreadable), and how many were passed. */
static __always_inline __u64 boxed_operator_definition(__u64 second, __u64 third, __u64 layout, __u64 *candidates)
{
	__u64 begin = second;
	*candidates = third;
	if (layout == BOXED_OPERATORS_VECTOR) {
		__u64 vector[2] = {};
		if (bpf_probe_read_user(vector, sizeof(vector), (const void *)second))
			return 0;
		begin = vector[0];
		*candidates = (vector[1] - vector[0]) / SHARED_POINTER_BYTES;
	}
	__u64 operator = read_user_u64(begin);
	return operator ? read_user_u64(operator) : 0;
}

/* record_function's own ops, which every `with record_function(...)` block calls through
 * torch.ops (profiler::_record_function_enter_new and _exit; _enter on torch 1.13) and torch's
 * profiler never observes (c10's unobserved list, symbolizer/aten/observed_ops.h): skipped
 * before the stack walk. The rest of that list is left to userspace. Compared as three words,
 * "profiler::_record_functi" little-endian: as a string constant it went to .rodata.str1.1,
 * and the kernel refused the object's BTF (EINVAL), so no map that needs it could be made. */
static __always_inline bool is_record_function_operator(__u64 definition)
{
	__u64 data = definition ? read_user_u64(definition) : 0;
	__u64 prefix[3] = {};
	if (!data || bpf_probe_read_user(prefix, sizeof(prefix), (const void *)data))
		return false;
	return prefix[0] == 0x72656c69666f7270ULL && /* "profiler" */
	       prefix[1] == 0x726f6365725f3a3aULL && /* "::_recor" */
	       prefix[2] == 0x6974636e75665f64ULL;   /* "d_functi" */
}

static __always_inline void read_boxed_operator(__u64 definition, __u64 candidates, struct boxed_operator *out)
{
	out->candidates = (__u32)candidates;
	if (!definition)
		return;
	out->name_length = read_std_string(definition, out->name, sizeof(out->name));
	if (out->name_length && candidates == 1)
		out->overload_length = read_std_string(definition + OPERATOR_NAME_OVERLOAD_OFFSET, out->overload,
						       sizeof(out->overload));
}

#endif /* TPROF_BPF_BOXED_OPERATORS_BPF_H */
