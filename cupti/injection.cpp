// libtprof_cupti.so: CUDA loads it at cuInit when CUDA_INJECTION64_PATH names it, and it sleeps
// until tprof attaches.
//
// Dormant: InitializeInjection loads libcupti if it can (one already loaded by torch first) and
// starts one thread that wakes every kPollPeriod to read a USDT semaphore. It enables no CUPTI
// activity and subscribes to nothing. tprof attaching a BPF program to the
// `tprof:device_activity` probe raises that semaphore (the kernel's uprobe reference counter);
// the thread then sends the GPUs' properties (read once through the process's CUDA driver),
// enables kernel, memcpy, memset, runtime and driver API and synchronization activity, and asks
// CUPTI for completed buffers at every wake-up; their times are mapped from the clock CUPTI
// stamps them with to CLOCK_MONOTONIC (BPF's clock) with readings of both taken at each
// delivery. Each completed buffer goes to tprof through the probe, in batches of fixed
// records (bpf/device_activity.h), which tprof's BPF program copies into its ring buffer: no
// file or socket, so it works across containers. When the semaphore falls back to 0 (tprof
// detached or died), the thread flushes and disables everything again.
//
// Never harms the target: every failure (no libcupti, no driver, no GPU, CUPTI refusing) leaves
// it dormant and is only counted; nothing throws out of here, and no signal reaches the thread.
// It leaves CUPTI's one-per-process settings to the target's own torch.profiler (Kineto):
// - It subscribes to no callbacks: CUPTI takes one subscriber, and Kineto needs it.
// - The timestamp callback it registers reads the clock Kineto's own reads (the TSC on x86-64),
//   since Kineto registers its clock only once and converts by it.
// - It does not start while another subscriber is there.
// - CUPTI completes every buffer to the buffer callbacks registered last, and Kineto drops the
//   ones it did not ask for, with its own records in them. So while tprof records, the target's
//   imports of cuptiActivityRegisterTimestampCallback and cuptiActivityRegisterCallbacks lead
//   here first (import_redirect.h): the library completes its buffers to itself, disables its
//   activity, tells tprof, and only then lets the registration through. tprof's GPU rows end
//   where the target's torch.profiler starts.
#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>

#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "activity_conversion.h"
#include "device_properties.h"
#include "import_redirect.h"
#include "tprof_cupti.h"

// The USDT semaphore of tprof:device_activity: the kernel adds one for every uprobe attached to
// the probe with a reference counter (libbpf does so for USDT probes). <sys/sdt.h> finds it by
// this name.
extern "C" {
__extension__ unsigned short tprof_device_activity_semaphore __attribute__((unused, section(".probes"), visibility("hidden")));
}

namespace tprof::cupti {
namespace {

constexpr timespec kPollPeriod{0, 200'000'000};  // 5 wake-ups a second: nothing measurable
constexpr size_t kBufferBytes = 4 << 20;         // per activity buffer CUPTI asks for
constexpr size_t kRecordAlignment = ACTIVITY_RECORD_ALIGNMENT;

constexpr CUpti_ActivityKind kActivityKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};

// The libcupti functions used, resolved with dlsym so that a process without libcupti loads
// this library all the same (and it stays dormant).
struct CuptiFunctions {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityRegisterTimestampCallback) register_timestamp = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped_records = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
};

struct Counters {
  std::atomic<uint64_t> watcher_wakeups{0};
  std::atomic<uint64_t> activations{0};
  std::atomic<uint64_t> buffers{0};
  std::atomic<uint64_t> records{0};
  std::atomic<uint64_t> batches{0};
  std::atomic<uint64_t> skipped_records{0};
  std::atomic<uint64_t> dropped_by_cupti{0};
  std::atomic<uint64_t> handovers{0};
  std::atomic<uint64_t> untimed_records{0};
  std::atomic<int32_t> last_error{0};
};

CuptiFunctions cupti;
DriverFunctions driver;
Devices devices;
std::atomic<bool> cupti_loaded{false};
std::atomic<bool> initialized{false};
Counters counters;
// CUPTI hands buffers over on its own thread or on the one that flushes: `delivery` guards the
// clock map the conversions share.
std::mutex delivery;
ClockMap clock;
// Guards the attach state below, which the watcher and the target's own calls into CUPTI (through
// the redirected imports) both change. CUPTI's callbacks never take it, so that a flush under it
// cannot wait on itself.
std::mutex attach_state;
bool active = false;
bool refused = false;  // CUPTI refused this attach, or was handed over: wait for the next attach
bool driver_resolved = false;
bool imports_redirected = false;

bool ok(CUptiResult result) {
  if (result == CUPTI_SUCCESS) return true;
  counters.last_error.store(static_cast<int32_t>(result), std::memory_order_relaxed);
  return false;
}

// libcupti as the process already has it (torch links one), else as the loader finds it.
void* open_libcupti() {
  if (const char* path = std::getenv("TPROF_CUPTI_LIBRARY"); path != nullptr && *path != '\0')
    return dlopen(path, RTLD_NOW | RTLD_LOCAL);
  for (const char* name : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) return handle;
  }
  for (const char* name : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return handle;
  }
  return nullptr;
}

template <typename Function>
bool resolve(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, name));
  return function != nullptr;
}

bool load_cupti() {
  void* library = open_libcupti();
  if (library == nullptr) return false;
  return resolve(library, "cuptiActivityRegisterCallbacks", cupti.register_callbacks) &&
         resolve(library, "cuptiActivityRegisterTimestampCallback", cupti.register_timestamp) &&
         resolve(library, "cuptiActivityEnable", cupti.enable) && resolve(library, "cuptiActivityDisable", cupti.disable) &&
         resolve(library, "cuptiActivityFlushAll", cupti.flush_all) &&
         resolve(library, "cuptiActivityGetNextRecord", cupti.next_record) &&
         resolve(library, "cuptiActivityGetNumDroppedRecords", cupti.dropped_records) &&
         resolve(library, "cuptiSubscribe", cupti.subscribe) && resolve(library, "cuptiUnsubscribe", cupti.unsubscribe);
}

uint64_t monotonic_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

bool tprof_attached() {
  return __atomic_load_n(&tprof_device_activity_semaphore, __ATOMIC_RELAXED) > 0;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kRecordAlignment, kBufferBytes));
  *size = *buffer == nullptr ? 0 : kBufferBytes;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI ignore_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Whether another CUPTI client holds CUPTI's one subscriber: Kineto takes it when the target's
// torch.profiler first runs, and keeps it. Tried and given back at once; any other answer (no
// GPU, CUPTI not initialized) is not another client.
bool another_cupti_client() {
  CUpti_SubscriberHandle probe = nullptr;
  const CUptiResult result = cupti.subscribe(&probe, ignore_callback, nullptr);
  if (result == CUPTI_SUCCESS) cupti.unsubscribe(probe);
  return result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
}

// The clock Kineto hands CUPTI (getApproximateTime in its ApproximateClock.h): the TSC on
// x86-64, the virtual counter on arm64, else CLOCK_REALTIME. Kineto converts its records by it
// whatever CUPTI answered its registration, and CUPTI likely refuses a timestamp callback once
// activity is enabled (the likeliest reading of a GPU run, not confirmed: docs/gpu.md), so the
// clock is the same whichever of tprof and Kineto comes first.
uint64_t CUPTIAPI kineto_clock() {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t ticks = 0;
  __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(ticks));
  return ticks;
#else
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
#endif
}

// A reading of CUPTI's clock and CLOCK_MONOTONIC, side by side: the TSC read between two
// CLOCK_MONOTONIC reads, taken where they are closest of a few tries, so that a preemption in
// between (tens of microseconds on a busy machine) does not shift every GPU time by as much.
void read_clocks() {
  constexpr int kTries = 8;
  uint64_t best_gap = UINT64_MAX, best_cupti = 0, best_monotonic = 0;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    const uint64_t before = monotonic_ns();
    const uint64_t cupti_time = kineto_clock();
    const uint64_t after = monotonic_ns();
    if (after - before < best_gap) {
      best_gap = after - before;
      best_cupti = cupti_time;
      best_monotonic = before + (after - before) / 2;
    }
  }
  clock.add_reading(best_cupti, best_monotonic);
}

void read_clocks_now() {
  const std::lock_guard lock(delivery);
  read_clocks();
}

// `batch` holds `count` records of the device_activity size (device_activity or device_properties).
void fire_batch(const void* batch, uint32_t count) {
  counters.batches.fetch_add(1, std::memory_order_relaxed);
  STAP_PROBE3(tprof, device_activity, batch, count, DEVICE_ACTIVITY_ABI_VERSION);
}

void deliver(uint8_t* buffer, size_t valid_size) {
  const std::lock_guard lock(delivery);
  read_clocks();
  std::array<device_activity, DEVICE_ACTIVITY_BATCH_MAX> batch;
  uint32_t count = 0;
  uint64_t untimed = 0;
  CUpti_Activity* record = nullptr;
  while (cupti.next_record(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    if (!convert_activity(*record, clock, devices, batch[count])) {
      counters.skipped_records.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    // A forced flush hands over records CUPTI has not completed, with no time: a row at 0 would
    // be wrong, so they are only counted.
    if (batch[count].start_ns == 0 || batch[count].end_ns == 0) {
      ++untimed;
      continue;
    }
    counters.records.fetch_add(1, std::memory_order_relaxed);
    if (++count == batch.size()) {
      fire_batch(batch.data(), count);
      count = 0;
    }
  }
  if (count > 0) fire_batch(batch.data(), count);
  if (untimed > 0) {
    counters.untimed_records.fetch_add(untimed, std::memory_order_relaxed);
    device_activity loss{};
    loss.kind = DEVICE_ACTIVITY_UNTIMED;
    loss.bytes = untimed;
    fire_batch(&loss, 1);
  }
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid_size) {
  counters.buffers.fetch_add(1, std::memory_order_relaxed);
  if (cupti_loaded.load(std::memory_order_acquire) && valid_size > 0) deliver(buffer, valid_size);
  size_t dropped = 0;
  if (cupti.dropped_records != nullptr && cupti.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS &&
      dropped > 0) {
    counters.dropped_by_cupti.fetch_add(dropped, std::memory_order_relaxed);
    device_activity loss{};
    loss.kind = DEVICE_ACTIVITY_DROPPED;
    loss.bytes = dropped;
    fire_batch(&loss, 1);
  }
  std::free(buffer);
}

// The driver the process loaded (libcudart loads it privately, so by name), else whatever the
// process's global scope offers.
void resolve_driver() {
  driver_resolved = true;
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!driver.resolve(library != nullptr ? library : RTLD_DEFAULT)) driver = {};
}

void send_refusal(CUptiResult reason) {
  device_activity refusal{};
  refusal.kind = DEVICE_ACTIVITY_REFUSED;
  refusal.bytes = static_cast<uint64_t>(reason);
  fire_batch(&refusal, 1);
}

// Read once, sent at every attach: a new tprof session knows nothing of the last one.
void send_device_properties() {
  if (!driver_resolved) resolve_driver();
  if (!devices.read(driver)) return;
  const std::span<const device_properties> records = devices.records();
  for (size_t first = 0; first < records.size(); first += DEVICE_ACTIVITY_BATCH_MAX)
    fire_batch(records.data() + first,
               static_cast<uint32_t>(std::min<size_t>(records.size() - first, DEVICE_ACTIVITY_BATCH_MAX)));
}

// With another client there (the target's torch.profiler, maybe mid-session), CUPTI's activity
// is theirs to end: flushing or disabling it would take from their trace.
void deactivate() {
  active = false;
  if (another_cupti_client()) return;
  ok(cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  for (CUpti_ActivityKind kind : kActivityKinds) cupti.disable(kind);
}

// Enables everything tprof exports. Any refusal (no driver, no GPU, another CUPTI client)
// undoes what was done and leaves the library dormant until the next attach.
void refuse() {
  deactivate();
  refused = true;
}

// The target's own profiler (Kineto) starts a session: it registers its timestamp callback, then
// its buffer callbacks, then enables its activity. What CUPTI holds in tprof's buffers goes to
// tprof first, and from then on CUPTI is the target's. It must happen at the first of the two
// registrations: on an H100, every GPU record still pending when the target registered its clock
// came out without times (95 of 95 in a run that handed over at the buffer registration).
void hand_over() {
  ok(cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  for (CUpti_ActivityKind kind : kActivityKinds) cupti.disable(kind);
  active = false;
  refused = true;  // until tprof attaches again; Kineto's subscriber then keeps it dormant
  counters.handovers.fetch_add(1, std::memory_order_relaxed);
  device_activity handover{};
  handover.kind = DEVICE_ACTIVITY_HANDED_OVER;
  handover.start_ns = monotonic_ns();
  fire_batch(&handover, 1);
}

void hand_over_if_active() {
  const std::lock_guard lock(attach_state);
  if (active) hand_over();
}

CUptiResult CUPTIAPI target_registers_timestamp(CUpti_TimestampCallbackFunc callback) {
  hand_over_if_active();
  return cupti.register_timestamp(callback);
}

CUptiResult CUPTIAPI target_registers_buffer_callbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                       CUpti_BuffersCallbackCompleteFunc completed) {
  hand_over_if_active();
  return cupti.register_callbacks(requested, completed);
}

// Held under the attach state, so that the target's subscription never meets the library's
// momentary one in another_cupti_client() and fails.
CUptiResult CUPTIAPI target_subscribes(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* data) {
  const std::lock_guard lock(attach_state);
  return cupti.subscribe(subscriber, callback, data);
}

// Before the first activation, and again when libraries were loaded since: never while tprof is
// absent, so that a process tprof never attaches to runs exactly as without the library.
void redirect_target_imports() {
  if (imports_redirected && !loaded_objects_changed()) return;
  if (!imports_redirected) loaded_objects_changed();  // the baseline for the next look
  imports_redirected = true;
  const void* skip[] = {reinterpret_cast<const void*>(&target_subscribes),
                        reinterpret_cast<const void*>(cupti.register_callbacks)};
  const ImportRedirect redirects[] = {
      {"cuptiActivityRegisterTimestampCallback", reinterpret_cast<void*>(&target_registers_timestamp)},
      {"cuptiActivityRegisterCallbacks", reinterpret_cast<void*>(&target_registers_buffer_callbacks)},
      {"cuptiSubscribe", reinterpret_cast<void*>(&target_subscribes)},
  };
  redirect_imports(redirects, skip);
}

void activate() {
  redirect_target_imports();
  counters.activations.fetch_add(1, std::memory_order_relaxed);
  if (another_cupti_client()) {
    counters.last_error.store(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, std::memory_order_relaxed);
    send_refusal(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    refused = true;
    return;
  }
  active = true;
  send_device_properties();
  read_clocks_now();
  if (!ok(cupti.register_timestamp(kineto_clock)) || !ok(cupti.register_callbacks(buffer_requested, buffer_completed))) {
    refuse();
    return;
  }
  for (CUpti_ActivityKind kind : kActivityKinds) {
    if (!ok(cupti.enable(kind))) {
      refuse();
      return;
    }
  }
}

void watch_once() {
  const std::lock_guard lock(attach_state);
  const bool attached = tprof_attached();
  if (!attached) refused = false;
  if (attached && !active && !refused) {
    activate();
  } else if (!attached && active) {
    deactivate();
  } else if (active) {
    redirect_target_imports();  // a library loaded since may import CUPTI too
    ok(cupti.flush_all(0));     // hand over completed buffers, so that tprof sees them within a poll
  }
}

void* watch_for_tprof(void*) {
  while (true) {
    nanosleep(&kPollPeriod, nullptr);
    counters.watcher_wakeups.fetch_add(1, std::memory_order_relaxed);
    watch_once();
  }
  return nullptr;
}

// A detached thread with every signal blocked, so that the target's signal handling is as it was.
void start_watcher() {
  sigset_t all{};
  sigset_t previous{};
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  if (pthread_create(&thread, &attributes, watch_for_tprof, nullptr) == 0) pthread_setname_np(thread, "tprof-cupti");
  pthread_attr_destroy(&attributes);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

}  // namespace
}  // namespace tprof::cupti

extern "C" {

__attribute__((visibility("default"))) int InitializeInjection(void) {
  using namespace tprof::cupti;
  if (initialized.exchange(true)) return 1;
  if (!load_cupti()) return 1;  // no libcupti: stay out of the way
  cupti_loaded.store(true, std::memory_order_release);
  // The clocks' first reading, long before tprof comes: the TSC's rate against CLOCK_MONOTONIC is
  // then known from the first record on (ClockMap takes it between its first and latest reading).
  read_clocks_now();
  start_watcher();
  return 1;
}

__attribute__((visibility("default"))) void tprof_cupti_read_counters(tprof_cupti_counters* out) {
  using namespace tprof::cupti;
  out->watcher_wakeups = counters.watcher_wakeups.load();
  out->activations = counters.activations.load();
  out->buffers = counters.buffers.load();
  out->records = counters.records.load();
  out->batches = counters.batches.load();
  out->skipped_records = counters.skipped_records.load();
  out->dropped_by_cupti = counters.dropped_by_cupti.load();
  out->handovers = counters.handovers.load();
  out->untimed_records = counters.untimed_records.load();
  out->cupti_loaded = cupti_loaded.load() ? 1 : 0;
  out->last_error = counters.last_error.load();
}

__attribute__((visibility("default"))) void tprof_cupti_buffer_completed(void* context, uint32_t stream, uint8_t* buffer,
                                                                         size_t size, size_t valid_size) {
  tprof::cupti::buffer_completed(static_cast<CUcontext>(context), stream, buffer, size, valid_size);
}

}  // extern "C"
