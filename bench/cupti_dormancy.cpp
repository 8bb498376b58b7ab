// What a dormant libtprof_cupti.so costs the process it is injected into: the same fixed CPU
// work runs in child processes with and without the library loaded and initialized (as CUDA
// does at cuInit), rounds interleaved, and the children's CPU time (every thread's, the
// library's watcher included) is compared. No tprof is attached, so the library must stay
// asleep: its only activity is the watcher waking 5 times a second.
//
// Usage: tprof-cupti-dormancy [ROUNDS] [WORK_SECONDS]   (default 7 rounds of about 2 s)
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Floating-point work that the compiler cannot drop; `iterations` calibrated to about the
// requested seconds.
double spin(uint64_t iterations) {
  volatile double sink = 0;
  double x = 1.0;
  for (uint64_t i = 0; i < iterations; ++i) x = x * 1.0000001 + 1e-9;
  sink = x;
  return sink;
}

uint64_t calibrate(double seconds) {
  const auto started = std::chrono::steady_clock::now();
  constexpr uint64_t kProbe = 50'000'000;
  spin(kProbe);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return static_cast<uint64_t>(static_cast<double>(kProbe) * seconds / took);
}

double cpu_seconds(const rusage& usage) {
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// The child's CPU seconds for the work, with the library loaded first or not.
double run_child(bool with_library, uint64_t iterations) {
  const pid_t child = fork();
  if (child == 0) {
    if (with_library) {
      void* library = dlopen(TPROF_CUPTI_LIBRARY_PATH, RTLD_NOW | RTLD_LOCAL);
      auto initialize = library ? reinterpret_cast<int (*)()>(dlsym(library, "InitializeInjection")) : nullptr;
      if (initialize == nullptr || initialize() != 1) _exit(3);
    }
    spin(iterations);
    _exit(0);
  }
  int status = 0;
  rusage usage{};
  if (wait4(child, &status, 0, &usage) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "tprof-cupti-dormancy: the child failed (status %d)\n", status);
    std::exit(1);
  }
  return cpu_seconds(usage);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  const double work_seconds = argc > 2 ? std::atof(argv[2]) : 2.0;
  if (rounds < 1 || work_seconds <= 0) {
    std::fprintf(stderr, "usage: tprof-cupti-dormancy [ROUNDS] [WORK_SECONDS]\n");
    return 2;
  }
  const uint64_t iterations = calibrate(work_seconds);
  std::vector<double> without_library, with_library;
  for (int round = 0; round < rounds; ++round) {
    without_library.push_back(run_child(false, iterations));
    with_library.push_back(run_child(true, iterations));
  }
  const double base = median(without_library);
  const double dormant = median(with_library);
  std::printf("%d rounds of %.1f s of work: CPU time without the library %.4f s, with it dormant %.4f s "
              "(median); ratio %.4f, difference %+.1f ms\n",
              rounds, work_seconds, base, dormant, dormant / base, (dormant - base) * 1e3);
  std::printf("per round, without / with:");
  for (int round = 0; round < rounds; ++round) std::printf(" %.3f/%.3f", without_library[round], with_library[round]);
  std::printf("\n");
  return 0;
}
