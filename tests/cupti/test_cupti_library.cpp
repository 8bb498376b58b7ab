// libtprof_cupti.so loaded as CUDA loads it (dlopen, then InitializeInjection) into a process with
// no GPU and no tprof: it must return at once, enable nothing, keep no thread busy, and hand the
// records of a buffer to tprof when asked. Each test runs in its own process (ctest), so the
// library's state starts fresh.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "tests/cupti/cupti_records.h"
#include "tprof_cupti.h"

namespace tprof::testing {
namespace {

struct Library {
  void* handle = nullptr;
  int (*initialize)() = nullptr;
  void (*read_counters)(tprof_cupti_counters*) = nullptr;
  void (*buffer_completed)(void*, uint32_t, uint8_t*, size_t, size_t) = nullptr;

  Library() {
    handle = dlopen(TPROF_CUPTI_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return;
    initialize = reinterpret_cast<int (*)()>(dlsym(handle, "InitializeInjection"));
    read_counters = reinterpret_cast<void (*)(tprof_cupti_counters*)>(dlsym(handle, "tprof_cupti_read_counters"));
    buffer_completed = reinterpret_cast<void (*)(void*, uint32_t, uint8_t*, size_t, size_t)>(
        dlsym(handle, "tprof_cupti_buffer_completed"));
  }
  tprof_cupti_counters counters() const {
    tprof_cupti_counters out{};
    read_counters(&out);
    return out;
  }
};

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

TEST(CuptiLibrary, InitializeInjectionReturnsAtOnceWithoutAGpuAndStaysDormant) {
  Library library;
  ASSERT_NE(library.handle, nullptr) << dlerror();
  ASSERT_NE(library.initialize, nullptr);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(library.initialize(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(500));
  EXPECT_EQ(library.initialize(), 1);  // CUDA may call it once per cuInit: the second does nothing

  const double cpu_before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  const tprof_cupti_counters counters = library.counters();
  EXPECT_EQ(counters.cupti_loaded, 1) << "the toolkit's libcupti is found through the library's search";
  // No tprof attached: nothing enabled, no buffer, no record.
  EXPECT_EQ(counters.activations, 0u);
  EXPECT_EQ(counters.buffers, 0u);
  EXPECT_EQ(counters.records, 0u);
  // The watcher sleeps: about 5 wake-ups a second, and next to no CPU.
  EXPECT_GE(counters.watcher_wakeups, 8u);
  EXPECT_LE(counters.watcher_wakeups, 12u);
  EXPECT_LT(process_cpu_seconds() - cpu_before, 0.05);
}

TEST(CuptiLibrary, WithoutLibcuptiItStartsNothing) {
  // In a child, so that the library loads fresh with the variable set.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("TPROF_CUPTI_LIBRARY", "/nonexistent/libcupti.so", 1);
    Library library;
    if (library.handle == nullptr || library.initialize() != 1) _exit(10);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    const tprof_cupti_counters counters = library.counters();
    _exit(counters.cupti_loaded == 0 && counters.watcher_wakeups == 0 ? 0 : 11);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: did not load or initialize; 11: it loaded CUPTI or started its thread";
}

TEST(CuptiLibrary, ACompletedBufferIsHandedOnInBatches) {
  Library library;
  ASSERT_NE(library.handle, nullptr) << dlerror();
  ASSERT_EQ(library.initialize(), 1);
  ActivityBuffer buffer;
  constexpr int kKernels = 300;  // more than one batch of DEVICE_ACTIVITY_BATCH_MAX
  for (int i = 0; i < kKernels; ++i) {
    auto& kernel = buffer.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    kernel.name = "k";
    kernel.correlationId = static_cast<uint32_t>(i + 1);
  }
  buffer.add<CUpti_ActivityName>(CUPTI_ACTIVITY_KIND_NAME);
  library.buffer_completed(nullptr, 0, buffer.release_copy(), buffer.size(), buffer.size());
  const tprof_cupti_counters counters = library.counters();
  EXPECT_EQ(counters.buffers, 1u);
  EXPECT_EQ(counters.records, static_cast<uint64_t>(kKernels));
  EXPECT_EQ(counters.batches, 2u);
  EXPECT_EQ(counters.skipped_records, 1u);
}

}  // namespace
}  // namespace tprof::testing
