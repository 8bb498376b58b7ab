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

extern "C" FakeCuptiState* fake_cupti_state();
