// libtprof_fake_cupti.so: a stand-in libcupti for the injection library's tests (the library loads
// the one TPROF_CUPTI_LIBRARY names). It answers as CUPTI does on a machine with a GPU, holds
// one subscriber as CUPTI does, and notes what the library asked of it, so that tests can check
// that the library leaves CUPTI's one-per-process settings to the target's own torch.profiler.
// Its buffers behave as CUPTI's on an H100: the one in flight was asked of the callbacks
// registered then, is completed to those registered when it completes, and its kernels lose their
// GPU times when a timestamp callback is registered before they are delivered.
#include <cupti.h>
#include <x86intrin.h>

#include <cstring>

#include "tests/cupti/fake_cupti.h"

namespace {
FakeCuptiState state;
CUpti_BuffersCallbackRequestFunc request_buffer = nullptr;
CUpti_BuffersCallbackCompleteFunc complete_buffer = nullptr;
uint8_t* in_flight = nullptr;
size_t in_flight_size = 0;
size_t in_flight_used = 0;
using KernelRecord = CUpti_ActivityKernel10;
}  // namespace

extern "C" {

__attribute__((visibility("default"))) FakeCuptiState* fake_cupti_state() { return &state; }

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc, void*) {
  if (state.other_client || state.subscribers > 0) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  ++state.subscribers;
  ++state.subscriptions;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&state);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  --state.subscribers;
  return CUPTI_SUCCESS;
}

// A kernel that ran just now, in the buffer in flight.
__attribute__((visibility("default"))) void fake_cupti_record_activity() {
  if (request_buffer == nullptr) return;
  if (in_flight == nullptr) {
    size_t records = 0;
    request_buffer(&in_flight, &in_flight_size, &records);
    in_flight_used = 0;
  }
  if (in_flight_used + sizeof(KernelRecord) > in_flight_size) return;
  KernelRecord kernel{};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.name = "fake_kernel";
  kernel.start = __rdtsc();
  kernel.end = kernel.start + 1000;
  std::memcpy(in_flight + in_flight_used, &kernel, sizeof(kernel));
  in_flight_used += sizeof(kernel);
}

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                           CUpti_BuffersCallbackCompleteFunc completed) {
  ++state.callback_registrations;
  request_buffer = requested;
  complete_buffer = completed;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) {
  state.timestamp = callback;
  for (size_t at = 0; in_flight != nullptr && at < in_flight_used; at += sizeof(KernelRecord)) {
    auto* kernel = reinterpret_cast<KernelRecord*>(in_flight + at);
    kernel->start = kernel->end = 0;
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityEnable(CUpti_ActivityKind) {
  ++state.enabled_kinds;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityDisable(CUpti_ActivityKind) {
  --state.enabled_kinds;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == 0) return CUPTI_SUCCESS;
  ++state.forced_flushes;
  if (in_flight != nullptr) {
    uint8_t* buffer = in_flight;
    in_flight = nullptr;
    complete_buffer(nullptr, 0, buffer, in_flight_size, in_flight_used);
  }
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid_size, CUpti_Activity** record) {
  uint8_t* next = *record == nullptr ? buffer : reinterpret_cast<uint8_t*>(*record) + sizeof(KernelRecord);
  if (next + sizeof(KernelRecord) > buffer + valid_size) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(next);
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}

}  // extern "C"
