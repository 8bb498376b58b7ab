// What the stand-in libcupti (tests/cupti/fake_cupti.cpp) saw the injection library do.
#pragma once

#include <cstdint>

struct FakeCuptiState {
  bool other_client = false;  // another subscriber (Kineto) holds CUPTI
  int subscribers = 0;        // held now
  int subscriptions = 0;      // ever granted
  int callback_registrations = 0;
  int enabled_kinds = 0;
  int forced_flushes = 0;
  uint64_t (*timestamp)() = nullptr;  // the registered timestamp callback
};

extern "C" {
FakeCuptiState* fake_cupti_state();
// An activity record written, as CUPTI writes one: into the buffer in flight, which it asks the
// registered buffer callbacks for when there is none.
void fake_cupti_record_activity();
}

// What the stand-in torch.profiler (tests/cupti/fake_kineto.cpp) got back from CUPTI.
struct FakeKinetoState {
  int own_buffers = 0;      // completed buffers it had asked for
  int unknown_buffers = 0;  // completed buffers it had not: Kineto drops them, and their records
};

extern "C" {
FakeKinetoState* fake_kineto_state();
int fake_kineto_start();  // as Kineto starts a session: subscribe, register clock and buffers, enable
void fake_kineto_stop();  // and ends it: flush everything, disable
void* fake_kineto_registration_import();  // what its import of cuptiActivityRegisterCallbacks leads to
}
