/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The targets of the session and who is calling: every probe begins by finding the calling
 * process among the targets (its settings, target_settings.h) and gives up at once when it is
 * not one that records now. The per-target loss counters live here too.
 */
#ifndef TPROF_BPF_TARGETS_BPF_H
#define TPROF_BPF_TARGETS_BPF_H

#include "op_record.h"
#include "target_settings.h"

/* Process id (as tprof sees it) -> its slot in target_settings. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TARGET_SLOTS_MAX);
	__type(key, __u32);
	__type(value, __u32);
} target_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, TARGET_SLOTS_MAX);
	__type(key, __u32);
	__type(value, struct target_settings);
} target_settings SEC(".maps");

/* LOSS_COUNTER_COUNT counters per slot (op_record.h), summed over CPUs by userspace. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, TARGET_SLOTS_MAX * LOSS_COUNTER_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} loss_counters SEC(".maps");

/* tprof's PID namespace (the inode of /proc/self/ns/pid), and whether it is the initial one.
 * Ids in records are the ones tprof sees in its /proc: the host's for a node agent, the pod's
 * for a sidecar sharing the target's namespace, whatever namespace the target itself is in. */
const volatile __u64 pid_namespace_inode = 0;
const volatile bool pid_namespace_is_initial = true;
/* The namespace's depth below the initial one, plus one; 0 until a probe has found it. No
 * file tells a process its own depth (its NSpid starts at its /proc's namespace). */
__u32 pid_namespace_level_plus_one = 0;

#define MAX_PID_NAMESPACE_DEPTH 32 /* the kernel's MAX_PID_NS_LEVEL */

struct thread_ids {
	__u32 tgid;
	__u32 tid;
	__u32 slot; /* the target's slot, once recording_target() has found it */
};

static __always_inline void count_loss(__u32 slot, __u32 counter)
{
	__u32 key = slot * LOSS_COUNTER_COUNT + counter;
	__u64 *count = bpf_map_lookup_elem(&loss_counters, &key);
	if (count)
		*count += 1;
}

/* A pid holds one number per level, from the initial namespace down to the one it was made in:
 * the number at `level` and the inode of that level's namespace. */
static __always_inline bool read_pid_number(struct pid *pid, __u32 level, struct upid *number)
{
	return level <= pid->level && !bpf_probe_read_kernel(number, sizeof(*number), &pid->numbers[level]);
}

/* The level of tprof's namespace, found once among the levels of a pid inside it. */
static __always_inline int tprof_namespace_level(struct pid *pid)
{
	if (pid_namespace_level_plus_one)
		return pid_namespace_level_plus_one - 1;
	for (__u32 level = 0; level < MAX_PID_NAMESPACE_DEPTH; level++) {
		struct upid number = {};
		if (!read_pid_number(pid, level, &number))
			return -1;
		if (BPF_CORE_READ(number.ns, ns.inum) == pid_namespace_inode) {
			pid_namespace_level_plus_one = level + 1;
			return level;
		}
	}
	return -1;
}

/* The number `pid` has in tprof's PID namespace; 0 where it has none there (a task of an
 * unrelated namespace). */
static __always_inline __u32 number_in_tprof_namespace(struct pid *pid)
{
	if (!pid)
		return 0;
	int level = tprof_namespace_level(pid);
	struct upid number = {};
	if (level < 0 || !read_pid_number(pid, level, &number))
		return 0;
	if (BPF_CORE_READ(number.ns, ns.inum) != pid_namespace_inode)
		return 0;
	return (__u32)number.nr;
}

/* A task's ids as tprof sees them. */
static __always_inline struct thread_ids task_thread_ids(struct task_struct *task)
{
	if (pid_namespace_is_initial)
		return (struct thread_ids){.tgid = (__u32)task->tgid, .tid = (__u32)task->pid};
	return (struct thread_ids){.tgid = number_in_tprof_namespace(task->group_leader->thread_pid),
				   .tid = number_in_tprof_namespace(task->thread_pid)};
}

/* The current thread's ids as tprof sees them. bpf_get_ns_current_pid_tgid would not do: it
 * answers only for tasks of tprof's own namespace, and a node agent's targets sit in child
 * namespaces (containers). */
static __always_inline struct thread_ids current_thread_ids(void)
{
	if (pid_namespace_is_initial) {
		/* The initial namespace's numbers the kernel keeps at hand. */
		__u64 ids = bpf_get_current_pid_tgid();
		return (struct thread_ids){.tgid = ids >> 32, .tid = (__u32)ids};
	}
	return task_thread_ids(bpf_get_current_task_btf());
}

/* The settings of the target `ids` names, its slot filled into `ids`; NULL when the process is
 * not a target, or not recording now. */
static __always_inline const struct target_settings *recording_target(struct thread_ids *ids)
{
	__u32 *slot = bpf_map_lookup_elem(&target_slots, &ids->tgid);
	if (!slot)
		return NULL;
	__u32 index = *slot;
	const struct target_settings *settings = bpf_map_lookup_elem(&target_settings, &index);
	if (!settings || !settings->recording)
		return NULL;
	ids->slot = index;
	return settings;
}

/* The calling thread's ids and its target's settings; NULL as recording_target. */
static __always_inline const struct target_settings *current_target(struct thread_ids *ids)
{
	*ids = current_thread_ids();
	return recording_target(ids);
}

#endif /* TPROF_BPF_TARGETS_BPF_H */
