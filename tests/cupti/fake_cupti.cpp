// libtprof_fake_cupti.so: a stand-in libcupti for the injection library's tests (the library loads
// the one TPROF_CUPTI_LIBRARY names). It answers as CUPTI does on a machine with a GPU, holds
// one subscriber as CUPTI does, and notes what the library asked of it, so that tests can check
// that the library leaves CUPTI's one-per-process settings to the target's own torch.profiler.
#include <cupti.h>

#include "tests/cupti/fake_cupti.h"

namespace {
FakeCuptiState state;
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

CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) {
  ++state.callback_registrations;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) {
  state.timestamp = callback;
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
  if (flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) ++state.forced_flushes;
  return CUPTI_SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t*, size_t, CUpti_Activity**) { return CUPTI_ERROR_MAX_LIMIT_REACHED; }

CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}

}  // extern "C"
