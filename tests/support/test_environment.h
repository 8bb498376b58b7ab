// Where the tests find the things they run against.
#pragma once

#include <string>

namespace tprof::testing {

// The repository root and the built tprof binary (compile-time paths from CMake).
std::string source_dir();
std::string tprof_binary();

// Debian's torch 1.13 libtorch_cpu, the library unit tests read.
std::string debian_libtorch_cpu();

}  // namespace tprof::testing
