// The GPU correlator: a CUDA API call takes the record id of the innermost range around it on
// its thread (closed or still open), and a GPU activity takes its launching call's, with where
// the call ran for the ac2g arrow; what cannot be linked goes out unlinked, never guessed.
#include "userspace/assemble/device_correlator.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/recording_sink.h"

namespace tprof {
namespace {

// Monotonic and Unix time are the same here, so that the test reads in one clock.
const MonotonicToUnix kSameClock(0);
constexpr uint32_t kThread = 77;
constexpr uint32_t kCudaLaunchKernel = 211;  // CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000

model::OpSpan range(uint64_t start, uint64_t end, uint64_t record_id, uint32_t depth) {
  model::OpSpan span;
  span.start_ns = start;
  span.end_ns = end;
  span.record_id = record_id;
  span.depth = depth;
  return span;
}

device_activity launch(uint32_t correlation, uint64_t start, uint64_t end, uint32_t thread = kThread) {
  device_activity call{};
  call.kind = DEVICE_ACTIVITY_RUNTIME;
  call.cbid = kCudaLaunchKernel;
  call.correlation = correlation;
  call.start_ns = start;
  call.end_ns = end;
  call.thread = thread;
  return call;
}

device_activity kernel(uint32_t correlation, uint64_t start, uint64_t end) {
  device_activity run{};
  run.kind = DEVICE_ACTIVITY_KERNEL;
  run.correlation = correlation;
  run.start_ns = start;
  run.end_ns = end;
  run.device = 0;
  run.stream = 7;
  run.name = 0x1000;
  run.grid[0] = 4;
  return run;
}

struct Fixture {
  test::RecordingSink sink;
  uint64_t open_range_id = 0;  // what the closer says is open
  DeviceCorrelator correlator{kSameClock,
                              {.open_range = [this](uint32_t, uint64_t) { return open_range_id; },
                               .kernel_name = [](uint64_t address) {
                                 return address == 0x1000 ? std::string("_Z4gemmv") : std::string();
                               }},
                              sink};
};

TEST(DeviceCorrelator, AnApiCallBelongsToTheInnermostClosedRangeAroundIt) {
  Fixture f;
  f.correlator.range_closed(kThread, range(100, 200, 3, 1));  // aten::addmm inside aten::linear
  f.correlator.range_closed(kThread, range(210, 220, 4, 1));  // a later sibling
  f.correlator.range_closed(kThread, range(90, 300, 2, 0));   // aten::linear
  f.correlator.add(launch(101, 150, 160));
  f.correlator.add(launch(102, 250, 255));  // between the two children: the parent's
  f.correlator.advance(1000);
  ASSERT_EQ(f.sink.device_activities.size(), 2u);
  EXPECT_EQ(f.sink.device_activities[0].name, "cudaLaunchKernel");
  EXPECT_EQ(f.sink.device_activities[0].tid, kThread);
  EXPECT_EQ(f.sink.device_activities[0].external_id, 3u);
  EXPECT_EQ(f.sink.device_activities[1].external_id, 2u);
  EXPECT_EQ(f.correlator.counts().api_calls_in_ops, 2u);
}

TEST(DeviceCorrelator, AnApiCallInsideARangeStillOpenTakesThatRange) {
  Fixture f;
  f.open_range_id = 9;
  f.correlator.add(launch(101, 150, 160));
  f.correlator.advance(1000);
  ASSERT_EQ(f.sink.device_activities.size(), 1u);
  EXPECT_EQ(f.sink.device_activities[0].external_id, 9u);
}

TEST(DeviceCorrelator, AnApiCallWaitsForTheWatermarkToPassItsEnd) {
  Fixture f;
  f.correlator.add(launch(101, 150, 160));
  f.correlator.advance(155);
  EXPECT_TRUE(f.sink.device_activities.empty());
  f.correlator.range_closed(kThread, range(100, 200, 3, 0));  // closes after the call was recorded
  f.correlator.advance(300);
  ASSERT_EQ(f.sink.device_activities.size(), 1u);
  EXPECT_EQ(f.sink.device_activities[0].external_id, 3u);
}

TEST(DeviceCorrelator, AKernelTakesItsLaunchsRangeAndPlaceWhicheverArrivesFirst) {
  Fixture f;
  f.correlator.range_closed(kThread, range(100, 200, 3, 0));
  f.correlator.add(kernel(101, 400, 500));  // its buffer came first
  f.correlator.advance(1000);
  EXPECT_TRUE(f.sink.device_activities.empty()) << "waits for its launch";
  f.correlator.add(launch(101, 150, 160));
  f.correlator.advance(1100);
  ASSERT_EQ(f.sink.device_activities.size(), 2u);
  const model::DeviceActivity& run = f.sink.device_activities[1];
  EXPECT_EQ(run.kind, model::DeviceActivityKind::kKernel);
  EXPECT_EQ(run.name, "gemm()") << "demangled";
  EXPECT_EQ(run.external_id, 3u);
  EXPECT_EQ(run.launch_tid, kThread);
  EXPECT_EQ(run.launch_start_ns, 150u);
  EXPECT_EQ(run.stream, 7);
  EXPECT_EQ(run.grid[0], 4u);
  EXPECT_EQ(f.correlator.counts().linked, 1u);
}

TEST(DeviceCorrelator, WhatCannotBeLinkedGoesOutUnlinked) {
  Fixture f;
  f.correlator.add(kernel(500, 400, 500));               // its launch never comes
  f.correlator.add(launch(501, 150, 160, /*thread=*/0));  // a call CUPTI named no thread for
  f.correlator.add(kernel(501, 600, 700));
  f.correlator.advance(1000);
  EXPECT_TRUE(f.sink.device_activities.empty());
  f.correlator.advance(700 + DeviceCorrelator::kLaunchWaitNs);
  ASSERT_EQ(f.sink.device_activities.size(), 2u) << "the two kernels; the call without a thread is left out";
  for (const model::DeviceActivity& run : f.sink.device_activities) {
    EXPECT_EQ(run.external_id, 0u);
    EXPECT_EQ(run.launch_tid, 0u);
  }
  EXPECT_EQ(f.correlator.counts().api_calls_without_thread, 1u);
}

TEST(DeviceCorrelator, FinishHandsOnEverythingLeft) {
  Fixture f;
  f.correlator.add(launch(101, 150, 160));
  f.correlator.add(kernel(101, 400, 500));
  f.correlator.add(kernel(102, 400, 500));
  f.correlator.finish();
  EXPECT_EQ(f.sink.device_activities.size(), 3u);
  EXPECT_EQ(f.correlator.counts().linked, 1u);
}

TEST(DeviceCorrelator, ForgetsRangesOlderThanItsHistory) {
  Fixture f;
  f.correlator.range_closed(kThread, range(100, 200, 3, 0));
  f.correlator.advance(200 + DeviceCorrelator::kHistoryNs + 100);
  f.correlator.add(launch(101, 150, 160));
  f.correlator.advance(200 + DeviceCorrelator::kHistoryNs + 200);
  ASSERT_EQ(f.sink.device_activities.size(), 1u);
  EXPECT_EQ(f.sink.device_activities[0].external_id, 0u);
}

}  // namespace
}  // namespace tprof
