#include "tests/support/test_environment.h"

#include <cstdint>
#include <fstream>
#include <stdexcept>

namespace tprof::testing {

std::string source_dir() { return TPROF_SOURCE_DIR; }
std::string tprof_binary() { return TPROF_BINARY; }
std::string debian_libtorch_cpu() { return "/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13"; }
std::string trixie_root() { return "/var/cache/tprof/trixie-torch"; }
std::string sid_root() { return "/var/cache/tprof/sid-torch"; }

bool has_tracing_capabilities() {
  constexpr int kCapSysAdmin = 21;
  constexpr int kCapPerfmon = 38;
  constexpr int kCapBpf = 39;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (!line.starts_with("CapEff:")) continue;
    const std::uint64_t effective = std::stoull(line.substr(line.find_first_not_of(" \t", 7)), nullptr, 16);
    const auto has = [effective](int capability) { return (effective >> capability) & 1U; };
    return has(kCapSysAdmin) || (has(kCapBpf) && has(kCapPerfmon));
  }
  return false;
}

void fail_harness(const std::string& message) { throw std::runtime_error(message); }

}  // namespace tprof::testing
