// Where c10's wait counters (c10::monitor::WaitCounterHandle, libc10) are named, started and
// stopped. torch 2.x starts one around each of its compiles whether or not a profiler runs
// ("pytorch.wait_counter.dynamo_compile", from Python: `_WaitCounter(key).guard()`), where torch
// 2.14's `(dynamo_timed)` record_function ranges open only while its own profiler runs: it is
// how tprof times dynamo's compile work and tells its ops from eager code. A handle holds only
// a pointer to its key's WaitCounterImpl, which does not keep the key either, so the constructor,
// which takes it, is probed too, at its entry and at its `ret`s (bpf/annotation_probes.bpf.h):
// - WaitCounterHandle(std::string_view key): this in rdi, the key's length in rsi, its data in rdx;
// - start(), which returns a SmallVector<intptr_t>: the slot for it in rdi, this in rsi;
// - stop(const SmallVector<intptr_t>&): this in rdi.
// torch 1.13's libc10 has no wait counters.
#pragma once

#include <cstdint>
#include <optional>

#include "symbolizer/binary/library_index.h"

namespace tprof::symbolizer {

struct WaitCounterSites {
  uint64_t constructor_address = 0;  // link-time, for its `ret`s
  // File offsets of each function's probe point (emulated where one keeps the arguments).
  uint64_t constructor = 0;
  uint64_t start = 0;
  uint64_t stop = 0;
};

// The sites in libc10, or none when it does not define all three.
std::optional<WaitCounterSites> find_wait_counter_sites(const LibraryIndex& libc10);

}  // namespace tprof::symbolizer
