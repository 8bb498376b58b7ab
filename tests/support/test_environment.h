// Where the tests find the things they run against.
#pragma once

#include <string>

namespace tprof::testing {

// The repository root and the built tprof binary (compile-time paths from CMake).
std::string source_dir();
std::string tprof_binary();

// Debian's torch 1.13 libtorch_cpu, the library unit tests read.
std::string debian_libtorch_cpu();

// The Debian trixie root with torch 2.6 that scripts/make-torch-root.sh trixie builds and caches.
std::string trixie_root();
// The Debian sid root with torch 2.14 on Python 3.14 (GCC 16) that scripts/make-torch-root.sh
// sid builds and caches.
std::string sid_root();

// Whether this process may attach uprobes and perf events: CAP_SYS_ADMIN, or CAP_BPF
// together with CAP_PERFMON.
bool has_tracing_capabilities();

// Ends a test's setup with a message: the harness itself could not do its job.
[[noreturn]] void fail_harness(const std::string& message);

}  // namespace tprof::testing
