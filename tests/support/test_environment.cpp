#include "tests/support/test_environment.h"

namespace tprof::testing {

std::string source_dir() { return TPROF_SOURCE_DIR; }
std::string tprof_binary() { return TPROF_BINARY; }
std::string debian_libtorch_cpu() { return "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"; }

}  // namespace tprof::testing
