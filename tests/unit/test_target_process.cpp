// TargetProcess's reads of a process: this test's own, and a child's.
#include "userspace/session/target_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>

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
// spent, whatever else runs on the machine.
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
  EXPECT_NEAR(static_cast<double>(*after - *before), static_cast<double>(spent), 5'000'000.0);
}

// Another process's CPU time, to the ns: --max-overhead reads the target's 50 times a second,
// where /proc/PID/stat's clock ticks (10 ms) would be a step's worth of noise.
TEST(TargetProcess, CpuTimeOfAnotherProcessIsFinerThanClockTicks) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile uint64_t work = 0;
    for (;;) work = work + 1;
  }
  const TargetProcess spinning(child);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto before = spinning.cpu_time_ns();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto after = spinning.cpu_time_ns();
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ASSERT_TRUE(before.has_value() && after.has_value());
  ASSERT_GT(*after, *before) << "the child spun meanwhile";
  EXPECT_NE(*before % 1'000'000, 0u) << "whole milliseconds: clock ticks, not the scheduler's ns";
  EXPECT_FALSE(spinning.cpu_time_ns().has_value()) << "gone once reaped";
}

}  // namespace
}  // namespace tprof
