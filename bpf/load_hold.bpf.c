// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Holding a process at the dynamic loader's notification (`_dl_debug_state`, which ld.so calls
 * once the objects of a dlopen are mapped and before any of their code has run), so that tprof
 * can put its probes into a freshly mapped libtorch before its first op; and at the CUDA
 * injection library's `InitializeInjection`, so that its probe is in before CUDA's first call.
 *
 * The probe is linked only to processes tprof traces (ptrace), and it asks the calling thread
 * to stop by sending it a signal: a traced thread stops before the signal is delivered, tprof
 * sees the stop, attaches, and resumes the thread with the signal cancelled, so the target
 * never receives it. The thread is at a function return, not in a system call, so nothing
 * returns EINTR. The signal is one whose default action is to ignore it, and only sent while
 * the thread has neither blocked it nor installed a handler: if tprof dies during the hold,
 * the kernel detaches it and delivers the signal, which is then dropped.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "load_hold.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Threads asked to stop, by tid: the signal sent, and where (load_hold.h). tprof deletes the
// entry when it sees the stop; a signal of the same number from anywhere else finds no entry and
// is passed on.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u32);
} hold_requests SEC(".maps");

// Holds not asked for because every candidate signal was blocked or handled by the thread.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} holds_refused SEC(".maps");

static __always_inline bool ignored_by_default_action(struct task_struct *task, int signal)
{
	unsigned long blocked = BPF_CORE_READ(task, blocked.sig[0]);
	if (blocked & (1UL << (signal - 1)))
		return false;
	struct sighand_struct *handlers = BPF_CORE_READ(task, sighand);
	unsigned long handler =
		(unsigned long)BPF_CORE_READ(handlers, action[signal - 1].sa.sa_handler);
	return handler == LOAD_HOLD_SIG_DFL || handler == LOAD_HOLD_SIG_IGN;
}

static __always_inline int hold_here(__u32 site)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u32 signal = 0;
	if (ignored_by_default_action(task, LOAD_HOLD_SIGNAL))
		signal = LOAD_HOLD_SIGNAL;
	else if (ignored_by_default_action(task, LOAD_HOLD_FALLBACK_SIGNAL))
		signal = LOAD_HOLD_FALLBACK_SIGNAL;
	if (signal == 0) {
		__u32 zero = 0;
		__u64 *refused = bpf_map_lookup_elem(&holds_refused, &zero);
		if (refused)
			__sync_fetch_and_add(refused, 1);
		return 0;
	}
	__u32 request = signal | site << LOAD_HOLD_SITE_SHIFT;
	if (bpf_map_update_elem(&hold_requests, &tid, &request, BPF_ANY) == 0)
		bpf_send_signal_thread(signal);
	return 0;
}

/* Per traced process (tgid), where tprof found it: the address of its loader's
 * `_r_debug.r_state`. glibc notifies twice per dlopen, with RT_ADD as the objects are about to be
 * mapped and with RT_CONSISTENT once they are: only the second is worth a hold. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} loader_states SEC(".maps");

/* The dynamic loader's notification: a dlopen's objects are about to be mapped, or are. Held
 * once they are, or at both where the loader's state could not be found or read. */
SEC("uprobe.multi")
int hold_at_loader(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u64 *state_address = bpf_map_lookup_elem(&loader_states, &tgid);
	int state = LOAD_HOLD_RT_CONSISTENT;
	if (state_address &&
	    bpf_probe_read_user(&state, sizeof(state), (const void *)*state_address) == 0 &&
	    state != LOAD_HOLD_RT_CONSISTENT)
		return 0;
	return hold_here(LOAD_HOLD_AT_LOADER);
}

/* The CUDA injection library's InitializeInjection, which cuInit calls once it has loaded it. */
SEC("uprobe.multi")
int hold_at_injection(void *ctx)
{
	return hold_here(LOAD_HOLD_AT_INJECTION);
}
