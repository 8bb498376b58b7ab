/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* What the thread_bases iterator writes for each thread of a process. */
#ifndef TPROF_THREAD_BASE_H
#define TPROF_THREAD_BASE_H

/* CUPTI names the thread of an API call by the low 32 bits of its pthread_self(), which on
 * x86-64 glibc is the thread's FS base (its TCB). */
struct thread_base {
	__u32 tid;
	__u32 fs_base_low;
};

#endif
