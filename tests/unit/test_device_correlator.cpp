// The GPU correlator: a CUDA API call takes the record id of the innermost range around it on
// its thread (closed or still open), and a GPU activity takes its launching call's, with where
// the call ran for the ac2g arrow; what cannot be linked goes out unlinked, never guessed.
#include "userspace/assemble/device_correlator.h"

#include <gtest/gtest.h>

#include <cstring>
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
                               .target_string = [](uint64_t address) {
                                 if (address == 0x1000) return std::string("_Z4gemmv");
                                 return address == 0x2000 ? std::string("NVIDIA H100 80GB HBM3") : std::string();
                               },
                               .os_thread = [](uint32_t cupti_thread) { return cupti_thread; }},
                              sink};
};

// An H100's properties as the library sends them (device_properties in a device_activity record).
device_activity h100(uint32_t device) {
  device_properties gpu{};
  gpu.kind = DEVICE_ACTIVITY_DEVICE;
  gpu.device = device;
  gpu.name = 0x2000;
  gpu.total_global_memory = 85'045'608'448;
  gpu.compute_major = 9;
  gpu.max_threads_per_block = 1024;
  gpu.max_threads_per_multiprocessor = 2048;
  gpu.warp_size = 32;
  gpu.multiprocessors = 132;
  device_activity record;
  std::memcpy(&record, &gpu, sizeof(record));
  return record;
}

TEST(DeviceCorrelator, AGpusPropertiesGoOnOnceAndGiveItsKernelsKinetosOccupancy) {
  Fixture f;
  f.correlator.add(kernel(100, 100, 200));  // before the properties: nothing to estimate with
  f.correlator.add(h100(0));
  f.correlator.add(h100(0));  // a later attach resends them
  device_activity wide = kernel(101, 300, 400);
  wide.grid[0] = 264;  // two blocks per SM
  wide.grid[1] = wide.grid[2] = 1;
  wide.block[0] = 256;
  wide.block[1] = wide.block[2] = 1;
  wide.active_blocks_per_sm = 4;
  f.correlator.add(wide);
  device_activity limited = wide;
  limited.correlation = 102;
  limited.active_blocks_per_sm = 1;  // the occupancy calculator lets one reside
  f.correlator.add(limited);
  device_activity unknown_limit = wide;
  unknown_limit.correlation = 103;
  unknown_limit.active_blocks_per_sm = 0;
  f.correlator.add(unknown_limit);
  f.correlator.finish();

  ASSERT_EQ(f.sink.devices.size(), 1u);
  EXPECT_EQ(f.sink.devices[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(f.sink.devices[0].multiprocessors, 132u);
  EXPECT_EQ(f.sink.devices[0].total_global_memory, 85'045'608'448u);
  EXPECT_EQ(f.correlator.counts().devices, 1u);
  ASSERT_EQ(f.sink.device_activities.size(), 4u);
  EXPECT_FALSE(f.sink.device_activities[0].has_occupancy);
  const model::DeviceActivity& two_per_sm = f.sink.device_activities[1];
  EXPECT_TRUE(two_per_sm.has_occupancy);
  EXPECT_FLOAT_EQ(two_per_sm.blocks_per_sm, 2.0f);
  EXPECT_FLOAT_EQ(two_per_sm.warps_per_sm, 16.0f);
  EXPECT_EQ(two_per_sm.achieved_occupancy_percent, 25) << "2 blocks x 256 threads of 2,048";
  EXPECT_EQ(f.sink.device_activities[2].achieved_occupancy_percent, 13) << "1 x 256 of 2,048, rounded";
  EXPECT_TRUE(f.sink.device_activities[3].has_occupancy);
  EXPECT_EQ(f.sink.device_activities[3].achieved_occupancy_percent, -1);
}

TEST(DeviceCorrelator, CountsWhatCuptiDropped) {
  Fixture f;
  device_activity dropped{};
  dropped.kind = DEVICE_ACTIVITY_DROPPED;
  dropped.bytes = 17;
  f.correlator.add(dropped);
  f.correlator.add(dropped);
  f.correlator.finish();
  EXPECT_EQ(f.correlator.counts().dropped_by_cupti, 34u);
  EXPECT_TRUE(f.sink.device_activities.empty());
}

// The library's word that the target's torch.profiler took CUPTI over, and its count of records
// a forced flush handed over without times: counted for the console, never written as rows.
TEST(DeviceCorrelator, AHandOverAndUntimedRecordsAreCountedNotWritten) {
  Fixture f;
  device_activity untimed{};
  untimed.kind = DEVICE_ACTIVITY_UNTIMED;
  untimed.bytes = 5;
  f.correlator.add(untimed);
  device_activity handover{};
  handover.kind = DEVICE_ACTIVITY_HANDED_OVER;
  handover.start_ns = 1'000'000;
  f.correlator.add(handover);
  f.correlator.finish();
  EXPECT_EQ(f.correlator.counts().untimed, 5u);
  EXPECT_EQ(f.correlator.counts().handed_over_ns, 1'000'000u);
  EXPECT_TRUE(f.sink.device_activities.empty());
}

// Kineto's CuptiCbidRegistry: cudaGetDevice and its like are left out, and of the driver's calls
// all but launches and virtual memory (CUPTI's ids, from the toolkit's cupti_*_cbid.h).
TEST(DeviceCorrelator, LeavesOutTheApiCallsTorchProfilerLeavesOut) {
  Fixture f;
  constexpr uint32_t kCudaGetDevice = 17, kCuLaunchKernel = 307, kCuDevicePrimaryCtxGetState = 392;
  device_activity get_device = launch(1, 100, 110);
  get_device.cbid = kCudaGetDevice;
  device_activity driver_launch = launch(2, 120, 130);
  driver_launch.kind = DEVICE_ACTIVITY_DRIVER;
  driver_launch.cbid = kCuLaunchKernel;
  device_activity context_query = driver_launch;
  context_query.correlation = 3;
  context_query.cbid = kCuDevicePrimaryCtxGetState;
  for (const device_activity& call : {get_device, launch(4, 140, 150), driver_launch, context_query})
    f.correlator.add(call);
  f.correlator.finish();
  ASSERT_EQ(f.sink.device_activities.size(), 2u);
  EXPECT_EQ(f.sink.device_activities[0].name, "cudaLaunchKernel");
  EXPECT_EQ(f.sink.device_activities[1].name, "cuLaunchKernel");
  EXPECT_EQ(f.correlator.counts().api_calls_hidden, 2u);
}

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
