// TargetProcess's reads of /proc, on this test's own process.
#include "userspace/session/target_process.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

namespace tprof {
namespace {

uint64_t rusage_cpu_ns() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto ns = [](const timeval& time) {
    return static_cast<uint64_t>(time.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(time.tv_usec) * 1'000;
  };
  return ns(usage.ru_utime) + ns(usage.ru_stime);
}

// The CPU time the estimate of the probes' cost divides by: what getrusage says the process
// spent, to /proc's clock ticks (10 ms), whatever else runs on the machine.
TEST(TargetProcess, CpuTimeIsWhatTheProcessSpent) {
  const TargetProcess self(::getpid());
  const auto before = self.cpu_time_ns();
  const uint64_t rusage_before = rusage_cpu_ns();
  ASSERT_TRUE(before.has_value());
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile uint64_t work = 0;
  while (std::chrono::steady_clock::now() < spin_until) work = work + 1;
  const auto after = self.cpu_time_ns();
  const uint64_t spent = rusage_cpu_ns() - rusage_before;
  ASSERT_TRUE(after.has_value());
  ASSERT_GT(spent, 50'000'000u) << "the spin got some CPU";
  EXPECT_NEAR(static_cast<double>(*after - *before), static_cast<double>(spent), 30'000'000.0);
}

}  // namespace
}  // namespace tprof
