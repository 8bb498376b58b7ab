// CUPTI's record structs (CUDA 13's Kernel10, Memcpy6, Memset4, API, Synchronization2), walked with
// libcupti's own cuptiActivityGetNextRecord, become tprof's device_activity records field for
// field.
#include "activity_conversion.h"

#include <cupti.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/cupti/cupti_records.h"
#include "tests/cupti/fake_driver.h"

namespace tprof::cupti {
namespace {

using testing::ActivityBuffer;

DriverFunctions fake_driver() {
  namespace fake = testing::fake_driver;
  return {.device_count = fake::device_count,
          .device = fake::device,
          .name = fake::name,
          .total_memory = fake::total_memory,
          .attribute = fake::attribute};
}

std::vector<device_activity> convert_all(ActivityBuffer& buffer, const ClockMap& clock, int* skipped,
                                         const Devices& devices = Devices()) {
  std::vector<device_activity> converted;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer.data(), buffer.size(), &record) == CUPTI_SUCCESS) {
    device_activity out;
    if (convert_activity(*record, clock, devices, out)) {
      converted.push_back(out);
    } else {
      ++*skipped;
    }
  }
  return converted;
}

TEST(ActivityConversion, KernelCarriesItsLaunchGeometryAndName) {
  ActivityBuffer buffer;
  auto& kernel = buffer.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  static const char kName[] = "void gemm<float>(Params)";
  kernel.name = kName;
  kernel.start = 1'000;
  kernel.end = 1'500;
  kernel.deviceId = 1;
  kernel.contextId = 2;
  kernel.streamId = 7;
  kernel.correlationId = 101;
  kernel.gridX = 4;
  kernel.gridY = 2;
  kernel.gridZ = 1;
  kernel.blockX = 256;
  kernel.blockY = 1;
  kernel.blockZ = 1;
  kernel.registersPerThread = 64;
  kernel.staticSharedMemory = 1024;
  kernel.dynamicSharedMemory = 3072;
  ClockMap clock;  // no readings: times as they are
  int skipped = 0;
  const auto records = convert_all(buffer, clock, &skipped);
  ASSERT_EQ(records.size(), 1u);
  const device_activity& out = records[0];
  EXPECT_EQ(out.kind, DEVICE_ACTIVITY_KERNEL);
  EXPECT_EQ(out.name, reinterpret_cast<uintptr_t>(kName));
  EXPECT_EQ(out.start_ns, 1'000u);
  EXPECT_EQ(out.end_ns, 1'500u);
  EXPECT_EQ(out.device, 1u);
  EXPECT_EQ(out.context, 2u);
  EXPECT_EQ(out.stream, 7u);
  EXPECT_EQ(out.correlation, 101u);
  EXPECT_EQ(out.grid[0], 4u);
  EXPECT_EQ(out.grid[1], 2u);
  EXPECT_EQ(out.grid[2], 1u);
  EXPECT_EQ(out.block[0], 256u);
  EXPECT_EQ(out.registers_per_thread, 64u);
  EXPECT_EQ(out.shared_memory, 4096u);
  EXPECT_EQ(out.active_blocks_per_sm, 0u) << "no properties of device 1: occupancy unknown";
}

TEST(ActivityConversion, CopiesSetsCallsAndSyncs) {
  ActivityBuffer buffer;
  auto& copy = buffer.add<CUpti_ActivityMemcpy6>(CUPTI_ACTIVITY_KIND_MEMCPY);
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  copy.bytes = 48;
  copy.streamId = 7;
  copy.correlationId = 102;
  auto& set = buffer.add<CUpti_ActivityMemset4>(CUPTI_ACTIVITY_KIND_MEMSET);
  set.bytes = 64;
  set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  set.correlationId = 103;
  auto& call = buffer.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_RUNTIME);
  call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  call.correlationId = 101;
  call.threadId = 0xdeadbeef;  // CUPTI's id, the low half of the caller's pthread_self()
  call.start = 10;
  call.end = 20;
  auto& driver = buffer.add<CUpti_ActivityAPI>(CUPTI_ACTIVITY_KIND_DRIVER);
  driver.correlationId = 104;
  auto& sync = buffer.add<CUpti_ActivitySynchronization2>(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  sync.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  sync.correlationId = 105;
  buffer.add<CUpti_ActivityName>(CUPTI_ACTIVITY_KIND_NAME);  // a kind tprof does not export

  ClockMap clock;
  int skipped = 0;
  const auto records = convert_all(buffer, clock, &skipped);
  ASSERT_EQ(records.size(), 5u);
  EXPECT_EQ(skipped, 1);
  EXPECT_EQ(records[0].kind, DEVICE_ACTIVITY_MEMCPY);
  EXPECT_EQ(records[0].copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(records[0].source_memory, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
  EXPECT_EQ(records[0].target_memory, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(records[0].bytes, 48u);
  EXPECT_EQ(records[0].stream, 7u);
  EXPECT_EQ(records[1].kind, DEVICE_ACTIVITY_MEMSET);
  EXPECT_EQ(records[1].bytes, 64u);
  EXPECT_EQ(records[1].correlation, 103u);
  EXPECT_EQ(records[2].kind, DEVICE_ACTIVITY_RUNTIME);
  EXPECT_EQ(records[2].cbid, static_cast<uint32_t>(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_EQ(records[2].thread, 0xdeadbeefu);  // tprof names the OS thread (userspace/loader/thread_bases.h)
  EXPECT_EQ(records[2].start_ns, 10u);
  EXPECT_EQ(records[3].kind, DEVICE_ACTIVITY_DRIVER);
  EXPECT_EQ(records[4].kind, DEVICE_ACTIVITY_SYNC);
  EXPECT_EQ(records[4].copy_kind, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
  EXPECT_EQ(records[4].stream, CUPTI_SYNCHRONIZATION_INVALID_VALUE);
}

TEST(Devices, PropertiesAreReadOnceThroughTheDriver) {
  Devices devices;
  EXPECT_TRUE(devices.records().empty());
  ASSERT_TRUE(devices.read(fake_driver()));
  ASSERT_EQ(devices.records().size(), 1u);
  const device_properties& gpu = devices.records()[0];
  EXPECT_EQ(gpu.kind, DEVICE_ACTIVITY_DEVICE);
  EXPECT_EQ(gpu.device, 0u);
  EXPECT_STREQ(reinterpret_cast<const char*>(gpu.name), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(gpu.total_global_memory, 85'045'608'448u);
  EXPECT_EQ(gpu.compute_major, 9u);
  EXPECT_EQ(gpu.compute_minor, 0u);
  EXPECT_EQ(gpu.max_threads_per_block, 1024u);
  EXPECT_EQ(gpu.max_threads_per_multiprocessor, 2048u);
  EXPECT_EQ(gpu.registers_per_block, 65536u);
  EXPECT_EQ(gpu.registers_per_multiprocessor, 65536u);
  EXPECT_EQ(gpu.warp_size, 32u);
  EXPECT_EQ(gpu.shared_memory_per_block, 49152u);
  EXPECT_EQ(gpu.shared_memory_per_multiprocessor, 233472u);
  EXPECT_EQ(gpu.shared_memory_per_block_optin, 232448u);
  EXPECT_EQ(gpu.multiprocessors, 132u);

  // Later attaches resend what was read: the driver is not asked again.
  DriverFunctions failing = fake_driver();
  failing.device_count = [](int*) { return CUDA_ERROR_NOT_INITIALIZED; };
  EXPECT_TRUE(devices.read(failing));
  EXPECT_EQ(devices.records().size(), 1u);
}

TEST(Devices, WithoutAnInitializedDriverNothingIsKnown) {
  DriverFunctions failing = fake_driver();
  failing.device_count = [](int*) { return CUDA_ERROR_NOT_INITIALIZED; };
  Devices devices;
  EXPECT_FALSE(devices.read(failing));
  EXPECT_FALSE(devices.read(DriverFunctions{}));
  EXPECT_TRUE(devices.records().empty());
  EXPECT_EQ(devices.active_blocks_per_sm({.device = 0, .registers_per_thread = 32, .threads_per_block = 256}), 0u);
}

// The resident-block limits of an H100 (65,536 registers and 2,048 threads per SM), worked out
// by hand: whichever of registers, threads and shared memory runs out first.
TEST(Devices, OccupancyIsTheTightestOfTheSmLimits) {
  Devices devices;
  ASSERT_TRUE(devices.read(fake_driver()));
  // 64 registers x 256 threads = 16,384 registers a block: 4 blocks.
  EXPECT_EQ(devices.active_blocks_per_sm({.device = 0, .registers_per_thread = 64, .static_shared_memory = 1024,
                                          .dynamic_shared_memory = 3072, .threads_per_block = 256}),
            4u);
  // 1,024 threads a block: 2 blocks by threads (and by registers, 32 x 1,024).
  EXPECT_EQ(devices.active_blocks_per_sm({.device = 0, .registers_per_thread = 32, .threads_per_block = 1024}), 2u);
  // 47 KiB of shared memory, plus the driver's 1 KiB, in 228 KiB an SM: 4 blocks.
  EXPECT_EQ(devices.active_blocks_per_sm(
                {.device = 0, .registers_per_thread = 16, .dynamic_shared_memory = 47 * 1024, .threads_per_block = 128}),
            4u);
  EXPECT_EQ(devices.active_blocks_per_sm({.device = 1, .registers_per_thread = 32, .threads_per_block = 256}), 0u)
      << "an unknown device";
}

TEST(ActivityConversion, AKernelOnAKnownDeviceCarriesItsOccupancyLimit) {
  Devices devices;
  ASSERT_TRUE(devices.read(fake_driver()));
  ActivityBuffer buffer;
  auto& kernel = buffer.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.deviceId = 0;
  kernel.blockX = 128;
  kernel.blockY = 2;
  kernel.blockZ = 1;
  kernel.registersPerThread = 64;
  ClockMap clock;
  int skipped = 0;
  const auto records = convert_all(buffer, clock, &skipped, devices);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].active_blocks_per_sm, 4u);
}

TEST(ActivityConversion, TimesGoFromCuptisClockToMonotonic) {
  ActivityBuffer buffer;
  auto& kernel = buffer.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  kernel.start = 5'000'000'000;
  kernel.end = 5'000'002'000;
  ClockMap clock;
  clock.add_reading(5'000'010'000, 70'000'000'000);  // CUPTI read 5.00001 s when monotonic read 70 s
  int skipped = 0;
  const auto records = convert_all(buffer, clock, &skipped);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].start_ns, 69'999'990'000u);
  EXPECT_EQ(records[0].end_ns, 69'999'992'000u);
}

// A TSC-like CUPTI clock (Kineto registers one): the rate comes from readings 10 ms or more apart.
TEST(ClockMap, TakesTheRateBetweenItsFirstAndLatestReadings) {
  ClockMap clock;
  clock.add_reading(1'000'000'000, 50'000'000'000);
  clock.add_reading(1'000'000'000 + 60'000'000, 50'000'000'000 + 20'000'000);  // 3 ticks a ns
  EXPECT_EQ(clock.to_monotonic(1'000'000'000 + 30'000'000), 50'000'000'000u + 10'000'000);
  EXPECT_EQ(clock.to_monotonic(1'000'000'000 + 90'000'000), 50'000'000'000u + 30'000'000);
}

TEST(ClockMap, ReadingsCloseTogetherKeepARateOfOne) {
  ClockMap clock;
  clock.add_reading(1'000, 2'000'000);
  clock.add_reading(4'000, 2'003'100);
  EXPECT_EQ(clock.to_monotonic(5'000), 2'004'100u);  // offset from the latest reading
}

// A reading a few microseconds off (its thread preempted between the two clocks) moves the rate
// by as little over a long span, and the offset by as much: never more.
TEST(ClockMap, AReadingOffByAFewMicrosecondsMovesTimesByNoMore) {
  ClockMap clock;
  clock.add_reading(1'000'000'000, 50'000'000'000);
  clock.add_reading(1'300'000'000, 50'100'000'000);                // 3 ticks a ns
  clock.add_reading(1'306'000'000, 50'102'000'000 + 50'000);       // 50 us late
  const double expected = 50'102'000'000.0 - 1'000.0;                // 3,000 ticks before it
  EXPECT_NEAR(static_cast<double>(clock.to_monotonic(1'306'000'000 - 3'000)), expected, 51'000.0);
}

// The rate of the last seconds, not of the hours since the library loaded: NTP slews
// CLOCK_MONOTONIC, and a rate averaged over hours misplaces what came in the last second.
TEST(ClockMap, TakesTheRateOfTheLastSecondsNotOfHours) {
  ClockMap clock;
  clock.add_reading(0 + 1, 1'000'000'000);                              // at load: 3 ticks a ns
  clock.add_reading(3 * 3'600'000'000'000ULL + 1, 3'601'000'000'000);  // an hour later, on attach
  // Two seconds later CLOCK_MONOTONIC runs 100 ppm faster than the hour's average.
  clock.add_reading(3 * 3'602'000'000'000ULL + 1, 3'603'000'200'000);
  const uint64_t one_second_before = 3 * 3'601'000'000'000ULL + 1;     // in ticks
  EXPECT_NEAR(static_cast<double>(clock.to_monotonic(one_second_before)), 3'602'000'100'000.0, 1'000.0);
}

TEST(ClockMap, AClockThatGoesBackStartsTheMapAfresh) {
  ClockMap clock;
  clock.add_reading(1'000'000'000, 50'000'000'000);
  clock.add_reading(1'300'000'000, 50'100'000'000);
  clock.add_reading(100, 50'200'000'000);  // went back: another source
  EXPECT_EQ(clock.to_monotonic(150), 50'200'000'050u);
}

}  // namespace
}  // namespace tprof::cupti
