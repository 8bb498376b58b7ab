// libtprof_cupti.so loaded as CUDA loads it (dlopen, then InitializeInjection) into a process with
// no GPU and no tprof: it must return at once, enable nothing, keep no thread busy, and hand the
// records of a buffer to tprof when asked. Each test runs in its own process (ctest), so the
// library's state starts fresh.
#include <dlfcn.h>
#include <elf.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <x86intrin.h>

#include "tests/cupti/cupti_records.h"
#include "tests/cupti/fake_cupti.h"
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

// The link-time address of the tprof:device_activity semaphore, from the library's
// .note.stapsdt (as libbpf finds it); 0 if absent.
uint64_t semaphore_address(const char* path) {
  std::ifstream file(path, std::ios::binary);
  const std::string image((std::istreambuf_iterator<char>(file)), {});
  const auto* header = reinterpret_cast<const Elf64_Ehdr*>(image.data());
  const auto* sections = reinterpret_cast<const Elf64_Shdr*>(image.data() + header->e_shoff);
  const char* names = image.data() + sections[header->e_shstrndx].sh_offset;
  for (int i = 0; i < header->e_shnum; ++i) {
    if (std::strcmp(names + sections[i].sh_name, ".note.stapsdt") != 0) continue;
    size_t at = sections[i].sh_offset;
    const size_t end = at + sections[i].sh_size;
    while (at + sizeof(Elf64_Nhdr) <= end) {
      const auto* note = reinterpret_cast<const Elf64_Nhdr*>(image.data() + at);
      const char* description = image.data() + at + sizeof(Elf64_Nhdr) + ((note->n_namesz + 3) & ~3u);
      // pc, base, semaphore, then "provider\0name\0arguments".
      const char* provider = description + 3 * sizeof(uint64_t);
      if (std::strcmp(provider, "tprof") == 0 && std::strcmp(provider + 6, "device_activity") == 0) {
        uint64_t semaphore = 0;
        std::memcpy(&semaphore, description + 2 * sizeof(uint64_t), sizeof(semaphore));
        return semaphore;
      }
      at += sizeof(Elf64_Nhdr) + ((note->n_namesz + 3) & ~3u) + ((note->n_descsz + 3) & ~3u);
    }
  }
  return 0;
}

// The injection library over the stand-in libcupti, with tprof's attach played by raising the
// probe's semaphore as the kernel does when a uprobe with a reference counter goes in.
struct LibraryOverFakeCupti {
  Library library;
  FakeCuptiState* cupti = nullptr;
  volatile unsigned short* semaphore = nullptr;

  LibraryOverFakeCupti() {
    setenv("TPROF_CUPTI_LIBRARY", TPROF_FAKE_CUPTI_PATH, 1);
    if (library.handle == nullptr || library.initialize() != 1) return;
    void* fake = dlopen(TPROF_FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
    if (fake != nullptr)
      cupti = reinterpret_cast<FakeCuptiState* (*)()>(dlsym(fake, "fake_cupti_state"))();
    link_map* map = nullptr;
    const uint64_t address = semaphore_address(TPROF_CUPTI_LIBRARY_PATH);
    if (address != 0 && dlinfo(library.handle, RTLD_DI_LINKMAP, &map) == 0)
      semaphore = reinterpret_cast<volatile unsigned short*>(map->l_addr + address);
  }
  bool ready() const { return cupti != nullptr && semaphore != nullptr; }
  // Waits up to 2 s (ten of the watcher's wake-ups) for `done`.
  template <typename Predicate>
  bool wait_for(Predicate done) const {
    for (int i = 0; i < 200 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return done();
  }
  void attach() { *semaphore = 1; }
  void detach() { *semaphore = 0; }
};

// Kineto takes CUPTI's one subscriber when the target's torch.profiler first runs; were tprof's
// library holding it then, Kineto would record no GPU activity for the life of the process. And
// Kineto converts every record by the clock it hands CUPTI, which CUPTI takes only before
// activity is enabled: the library hands CUPTI that same clock (the TSC).
TEST(CuptiLibrary, AttachedItHoldsNoSubscriberAndStampsWithKinetosClock) {
  LibraryOverFakeCupti fixture;
  ASSERT_TRUE(fixture.ready());
  fixture.attach();
  ASSERT_TRUE(fixture.wait_for([&] { return fixture.cupti->enabled_kinds == 6; }));
  EXPECT_EQ(fixture.cupti->subscribers, 0);
  EXPECT_EQ(fixture.library.counters().activations, 1u);
  ASSERT_NE(fixture.cupti->timestamp, nullptr);
  const uint64_t before = __rdtsc();
  const uint64_t stamped = fixture.cupti->timestamp();
  EXPECT_GE(stamped, before);
  EXPECT_LE(stamped, __rdtsc());
  fixture.detach();
  ASSERT_TRUE(fixture.wait_for([&] { return fixture.cupti->enabled_kinds == 0; }));
  EXPECT_EQ(fixture.cupti->forced_flushes, 1) << "what was recorded goes to tprof before it goes";
}

// The target profiled itself before tprof came: the library stays dormant and says why.
TEST(CuptiLibrary, WithAnotherCuptiClientItEnablesNothing) {
  LibraryOverFakeCupti fixture;
  ASSERT_TRUE(fixture.ready());
  fixture.cupti->other_client = true;
  fixture.attach();
  ASSERT_TRUE(fixture.wait_for([&] { return fixture.library.counters().activations == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // and it does not try again
  EXPECT_EQ(fixture.library.counters().activations, 1u);
  EXPECT_EQ(fixture.cupti->enabled_kinds, 0);
  EXPECT_EQ(fixture.cupti->callback_registrations, 0);
  EXPECT_EQ(fixture.cupti->timestamp, nullptr);
  EXPECT_EQ(fixture.library.counters().last_error, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
}

// The target's torch.profiler started while tprof recorded: when tprof goes, its session may
// still run, and the activity is left as it is rather than flushed or disabled under it.
TEST(CuptiLibrary, WhenTprofGoesAfterAnotherClientCameItLeavesCuptiAsItIs) {
  LibraryOverFakeCupti fixture;
  ASSERT_TRUE(fixture.ready());
  fixture.attach();
  ASSERT_TRUE(fixture.wait_for([&] { return fixture.cupti->enabled_kinds == 6; }));
  fixture.cupti->other_client = true;
  fixture.detach();
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(fixture.cupti->enabled_kinds, 6);
  EXPECT_EQ(fixture.cupti->forced_flushes, 0);
}

// The stand-in torch.profiler (tests/cupti/fake_kineto.cpp), loaded into the test process.
struct FakeKineto {
  void* handle = dlopen(TPROF_FAKE_KINETO_PATH, RTLD_NOW | RTLD_LOCAL);
  template <typename Function>
  Function* get(const char* name) const {
    return reinterpret_cast<Function*>(dlsym(handle, name));
  }
  FakeKinetoState& state() const { return *get<FakeKinetoState*()>("fake_kineto_state")(); }
  int start() const { return get<int()>("fake_kineto_start")(); }
  void stop() const { get<void()>("fake_kineto_stop")(); }
  void* registration_import() const { return get<void*()>("fake_kineto_registration_import")(); }
};

void record_activity() {
  void* fake = dlopen(TPROF_FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD);
  reinterpret_cast<void (*)()>(dlsym(fake, "fake_cupti_record_activity"))();
}

void* real_registration() {
  return dlsym(dlopen(TPROF_FAKE_CUPTI_PATH, RTLD_NOW | RTLD_NOLOAD), "cuptiActivityRegisterCallbacks");
}

// CUPTI completes every buffer to the callbacks registered last. The target's torch.profiler
// starting while tprof records registers Kineto's, and Kineto drops the library's buffer in
// flight, which by then holds Kineto's own first records: on an H100 its trace had 0 of 90
// kernels. And the clock Kineto registers just before takes the GPU times of what is pending.
// The library sees the first registration (through the target's import), takes its buffer back
// with its records timed, disables its activity, and tells tprof.
TEST(CuptiLibrary, TheTargetsProfilerStartingWhileTprofRecordsGetsOnlyTheBuffersItAskedFor) {
  LibraryOverFakeCupti fixture;
  ASSERT_TRUE(fixture.ready());
  FakeKineto kineto;
  ASSERT_NE(kineto.handle, nullptr) << dlerror();
  EXPECT_EQ(kineto.registration_import(), real_registration()) << "no redirect before tprof attaches";
  fixture.attach();
  ASSERT_TRUE(fixture.wait_for([&] { return fixture.cupti->enabled_kinds == 6; }));
  EXPECT_NE(kineto.registration_import(), real_registration());
  record_activity();  // a buffer of the library's in flight

  ASSERT_EQ(kineto.start(), 0) << "1: its subscription, 2: its registration, 3: its enable failed";
  EXPECT_EQ(kineto.state().unknown_buffers, 0);
  EXPECT_EQ(fixture.library.counters().buffers, 1u) << "the library's buffer came back to it";
  EXPECT_EQ(fixture.library.counters().records, 1u);
  EXPECT_EQ(fixture.library.counters().untimed_records, 0u) << "handed back before the target's clock came";
  EXPECT_EQ(fixture.library.counters().handovers, 1u);
  EXPECT_EQ(fixture.cupti->enabled_kinds, 1) << "only the target's kind is left enabled";

  record_activity();
  kineto.stop();
  EXPECT_EQ(kineto.state().own_buffers, 1);
  EXPECT_EQ(kineto.state().unknown_buffers, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // and the library stays out
  EXPECT_EQ(fixture.library.counters().activations, 1u);
  EXPECT_EQ(fixture.cupti->callback_registrations, 2);
}

// A library loaded after tprof attached (a plugin importing CUPTI) is redirected within a poll.
TEST(CuptiLibrary, ALibraryLoadedWhileTprofRecordsHasItsImportRedirectedToo) {
  LibraryOverFakeCupti fixture;
  ASSERT_TRUE(fixture.ready());
  fixture.attach();
  ASSERT_TRUE(fixture.wait_for([&] { return fixture.cupti->enabled_kinds == 6; }));
  FakeKineto kineto;
  ASSERT_NE(kineto.handle, nullptr) << dlerror();
  EXPECT_TRUE(fixture.wait_for([&] { return kineto.registration_import() != real_registration(); }));
  record_activity();
  ASSERT_EQ(kineto.start(), 0);
  EXPECT_EQ(kineto.state().unknown_buffers, 0);
  EXPECT_EQ(fixture.library.counters().handovers, 1u);
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
  const uint64_t now = __rdtsc();  // CUPTI's clock here, as Kineto's
  for (int i = 0; i < kKernels; ++i) {
    auto& kernel = buffer.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    kernel.name = "k";
    kernel.correlationId = static_cast<uint32_t>(i + 1);
    kernel.start = now + static_cast<uint64_t>(i);
    kernel.end = kernel.start + 1;
  }
  buffer.add<CUpti_ActivityName>(CUPTI_ACTIVITY_KIND_NAME);
  library.buffer_completed(nullptr, 0, buffer.release_copy(), buffer.size(), buffer.size());
  const tprof_cupti_counters counters = library.counters();
  EXPECT_EQ(counters.buffers, 1u);
  EXPECT_EQ(counters.records, static_cast<uint64_t>(kKernels));
  EXPECT_EQ(counters.batches, 2u);
  EXPECT_EQ(counters.skipped_records, 1u);
  EXPECT_EQ(counters.untimed_records, 0u);
}

// A forced flush hands over records CUPTI has not finished, with start and end 0: they are
// counted and told to tprof (one more batch), never sent as rows at time 0.
TEST(CuptiLibrary, UnfinishedRecordsWithoutTimesAreCountedNotSent) {
  Library library;
  ASSERT_NE(library.handle, nullptr) << dlerror();
  ASSERT_EQ(library.initialize(), 1);
  ActivityBuffer buffer;
  auto& finished = buffer.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  finished.name = "finished";
  finished.start = __rdtsc();
  finished.end = finished.start + 1000;
  buffer.add<CUpti_ActivityKernel10>(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL).name = "unfinished";
  library.buffer_completed(nullptr, 0, buffer.release_copy(), buffer.size(), buffer.size());
  const tprof_cupti_counters counters = library.counters();
  EXPECT_EQ(counters.records, 1u);
  EXPECT_EQ(counters.untimed_records, 1u);
  EXPECT_EQ(counters.batches, 2u) << "the finished kernel, then the count of the unfinished one";
}

}  // namespace
}  // namespace tprof::testing
