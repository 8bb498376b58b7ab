// libtprof_fake_kineto.so: a stand-in for the target's own torch.profiler in the injection
// library's tests. Like Kineto in libtorch_cpu.so, it imports libcupti's functions by name (here
// the stand-in libcupti's), subscribes, and at every session start registers its clock, then its
// buffer callbacks, then enables its activity;
// and drops a completed buffer it did not ask for, as Kineto does ("bufferCompleted called with
// unknown buffer"), records and all.
#include <cupti.h>
#include <x86intrin.h>

#include <cstdlib>
#include <set>

#include "tests/cupti/fake_cupti.h"

namespace {
FakeKinetoState state;
std::set<uint8_t*> asked_for;
CUpti_SubscriberHandle subscriber = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 4096));
  *size = 4096;
  *max_records = 0;
  asked_for.insert(*buffer);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t) {
  if (asked_for.erase(buffer) == 0) {
    ++state.unknown_buffers;
    return;
  }
  ++state.own_buffers;
  std::free(buffer);
}

void CUPTIAPI ignore(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

uint64_t CUPTIAPI approximate_time() { return __rdtsc(); }
}  // namespace

extern "C" {

__attribute__((visibility("default"))) FakeKinetoState* fake_kineto_state() { return &state; }

__attribute__((visibility("default"))) int fake_kineto_start() {
  if (subscriber == nullptr && cuptiSubscribe(&subscriber, ignore, nullptr) != CUPTI_SUCCESS) return 1;
  cuptiActivityRegisterTimestampCallback(approximate_time);  // Kineto goes on whatever CUPTI answers
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) return 2;
  return cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS ? 0 : 3;
}

__attribute__((visibility("default"))) void fake_kineto_stop() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
}

__attribute__((visibility("default"))) void* fake_kineto_registration_import() {
  return reinterpret_cast<void*>(&cuptiActivityRegisterCallbacks);
}

}  // extern "C"
