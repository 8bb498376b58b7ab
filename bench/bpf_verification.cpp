// How long the kernel takes to load tprof's op tracer BPF object, the largest part of an attach
// once libtorch_cpu's plan comes from the plan cache (docs/BENCHMARKS.md), and how it splits
// among the programs: each one's verification time and the instructions the verifier walked.
// The object is loaded as tprof loads it (OpTracer), with the same read-only settings, and
// unloaded at once.
//
//   sudo build/tprof-bpf-verification [ROUNDS]
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "op_tracer.skel.h"

namespace {

constexpr ino_t kInitialPidNamespaceInode = 0xEFFFFFFC;  // as OpTracer sets it
constexpr size_t kLogBytes = 64 << 10;                    // the statistics are the log's last lines

struct SkeletonDeleter {
  void operator()(op_tracer* skeleton) const { op_tracer__destroy(skeleton); }
};

double now_ms() {
  timespec time{};
  clock_gettime(CLOCK_MONOTONIC, &time);
  return static_cast<double>(time.tv_sec) * 1e3 + static_cast<double>(time.tv_nsec) / 1e6;
}

// The verifier's line that starts with `prefix` ("verification time", "processed"), to its end.
std::string log_line(const char* log, const char* prefix) {
  const char* found = log != nullptr ? std::strstr(log, prefix) : nullptr;
  if (found == nullptr) return "";
  return std::string(found, std::strcspn(found, "\n"));
}

// One load: its wall time, and each program's verifier statistics.
double load_once(std::map<std::string, std::string>& statistics) {
  std::unique_ptr<op_tracer, SkeletonDeleter> skeleton(op_tracer__open());
  if (!skeleton) throw std::runtime_error("cannot open the op tracer BPF object");
  struct stat pid_namespace{};
  ::stat("/proc/self/ns/pid", &pid_namespace);
  skeleton->rodata->pid_namespace_inode = pid_namespace.st_ino;
  skeleton->rodata->pid_namespace_is_initial = pid_namespace.st_ino == kInitialPidNamespaceInode;
  std::vector<std::unique_ptr<char[]>> logs;
  bpf_program* program = nullptr;
  bpf_object__for_each_program(program, skeleton->obj) {
    logs.push_back(std::make_unique<char[]>(kLogBytes));
    bpf_program__set_log_buf(program, logs.back().get(), kLogBytes);
    bpf_program__set_log_level(program, 4);  // statistics only
  }
  const double started_ms = now_ms();
  if (op_tracer__load(skeleton.get()) != 0) throw std::runtime_error("cannot load the op tracer BPF object");
  const double load_ms = now_ms() - started_ms;
  bpf_object__for_each_program(program, skeleton->obj) {
    size_t size = 0;
    const char* log = bpf_program__log_buf(program, &size);
    statistics[bpf_program__name(program)] = log_line(log, "verification time") + "; " + log_line(log, "processed");
  }
  return load_ms;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  try {
    std::map<std::string, std::string> statistics;
    for (int round = 0; round < rounds; ++round) std::printf("load %.1f ms\n", load_once(statistics));
    for (const auto& [name, line] : statistics) std::printf("%-24s %s\n", name.c_str(), line.c_str());
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tprof-bpf-verification: %s\n", error.what());
    return 1;
  }
  return 0;
}
