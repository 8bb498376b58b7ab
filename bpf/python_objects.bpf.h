/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading CPython objects a runtime keeps in a frame's slots: finding the frame of a given code
 * object on the calling thread's stack, following a cell or a list, and checking that an object
 * is a str whose characters can be copied as they are. Object headers are those of CPython's
 * default builds, 3.9 to 3.14, the same in each (tprof refuses free-threaded ones).
 */
#ifndef TPROF_BPF_PYTHON_OBJECTS_BPF_H
#define TPROF_BPF_PYTHON_OBJECTS_BPF_H

#include "python_walker.bpf.h"

#define PY_OBJECT_TYPE 8   /* ob_type */
#define PY_TYPE_NAME 24    /* PyTypeObject.tp_name */
#define PY_CELL_REF 16     /* PyCellObject.ob_ref */
#define PY_LIST_SIZE 16    /* PyListObject.ob_size */
#define PY_LIST_ITEMS 24   /* PyListObject.ob_item */
#define PY_STR_LENGTH 16   /* PyASCIIObject.length */
#define PY_STR_STATE 32    /* PyASCIIObject.state: compact (bit 5), ascii (bit 6) */
#define PY_STR_COMPACT_ASCII 0x60
/* tp_name's first 8 bytes, NUL included, as a little-endian word. */
#define PY_TYPE_NAME_STR 0x727473ULL    /* "str" */
#define PY_TYPE_NAME_LIST 0x7473696cULL /* "list" */

/* The object's type, told by its name: a builtin's tp_name is its bare name. */
static __always_inline __u64 type_name_word(__u64 object)
{
	__u64 type = read_user_u64(object + PY_OBJECT_TYPE);
	__u64 name = type ? read_user_u64(type + PY_TYPE_NAME) : 0;
	__u64 word = 0;
	if (name)
		bpf_probe_read_user_str(&word, sizeof(word), (const void *)name);
	return word;
}

struct frame_search {
	const struct python_walker_config *config;
	__u64 frame;
	__u64 code;
	bool found;
};

static long frame_search_step(__u32 index, void *context)
{
	struct frame_search *search = context;
	if (!search->frame)
		return 1;
	const struct python_walker_config *config = search->config;
	__u64 code = read_user_u64(search->frame + config->frame_code) & ~config->executable_tag_mask;
	if (code == search->code) {
		search->found = true;
		return 1;
	}
	search->frame = read_user_u64(search->frame + config->frame_previous);
	return 0;
}

/* The innermost frame of `code` on the calling thread's Python stack; 0 if none. Uses the
 * thread's walk buffer: not for a probe that walks the stack meanwhile. */
static __always_inline __u64 find_python_frame_of(const struct target_settings *target, struct thread_ids ids,
						  __u64 code)
{
	struct walk_scratch *scratch = op_walk_buffer();
	if (!target->python.enabled || !scratch || !load_thread_state(&target->python, scratch, ids, false))
		return 0;
	struct frame_search search = {
		.config = &target->python, .frame = innermost_frame(&target->python, scratch), .code = code};
	bpf_loop(PYTHON_STACK_MAX_FRAMES + 64, frame_search_step, &search, 0);
	return search.found ? search.frame : 0;
}

static __always_inline __u64 python_cell_contents(__u64 cell)
{
	return read_user_u64(cell + PY_CELL_REF);
}

/* A list's first item; 0 if `list` is no list, or an empty one. */
static __always_inline __u64 python_list_first(__u64 list)
{
	if (type_name_word(list) != PY_TYPE_NAME_LIST || (__s64)read_user_u64(list + PY_LIST_SIZE) <= 0)
		return 0;
	return read_user_u64(read_user_u64(list + PY_LIST_ITEMS));
}

/* Whether `object` is a compact ASCII str: its characters follow its header, one byte each. */
static __always_inline bool is_python_ascii_str(__u64 object)
{
	if (type_name_word(object) != PY_TYPE_NAME_STR)
		return false;
	__u32 state = 0;
	bpf_probe_read_user(&state, sizeof(state), (const void *)(object + PY_STR_STATE));
	return (state & PY_STR_COMPACT_ASCII) == PY_STR_COMPACT_ASCII;
}

static __always_inline __u64 python_str_length(__u64 str)
{
	return read_user_u64(str + PY_STR_LENGTH);
}

#endif /* TPROF_BPF_PYTHON_OBJECTS_BPF_H */
