/* The CUPTI injection library's own C interface, beside CUDA's InitializeInjection: what a test
 * host or `tprof doctor` can ask of a loaded libtprof_cupti.so. */
#ifndef TPROF_CUPTI_H
#define TPROF_CUPTI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tprof_cupti_counters {
	uint64_t watcher_wakeups;   /* times the watcher thread woke to look for tprof */
	uint64_t activations;       /* times CUPTI activity was enabled because tprof attached */
	uint64_t buffers;           /* activity buffers completed */
	uint64_t records;           /* activity records handed to tprof */
	uint64_t batches;           /* USDT probe firings */
	uint64_t skipped_records;   /* records of kinds tprof does not export */
	uint64_t dropped_by_cupti;  /* records CUPTI dropped for want of buffer space */
	uint64_t handovers;         /* times the target's own profiler took CUPTI over while tprof recorded */
	uint64_t untimed_records;   /* records a forced flush handed over unfinished, without times */
	int32_t cupti_loaded;       /* 1 once libcupti was found and its functions resolved */
	int32_t last_error;         /* the last CUptiResult that failed; 0: none */
};

/* CUDA calls this at cuInit when CUDA_INJECTION64_PATH names this library. Returns at once: it
 * loads libcupti if it can and starts a thread that sleeps until tprof attaches. */
int InitializeInjection(void);

void tprof_cupti_read_counters(struct tprof_cupti_counters* counters);

/* CUPTI's buffer-completed callback, exported so that a test host (or a replay tool) can hand it
 * activity buffers as CUPTI would: it converts the records, fires `tprof:device_activity` per
 * batch and frees the buffer with free(). */
void tprof_cupti_buffer_completed(void* context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid_size);

#ifdef __cplusplus
}
#endif

#endif /* TPROF_CUPTI_H */
