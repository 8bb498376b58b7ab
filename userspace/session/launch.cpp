#include "userspace/session/launch.h"

#include <filesystem>

namespace tprof {

namespace fs = std::filesystem;

std::optional<std::string> injection_library_path() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return std::nullopt;
  const fs::path library = self.parent_path() / "libtprof_cupti.so";
  if (!fs::exists(library, error)) return std::nullopt;
  return library.string();
}

std::vector<std::string> injection_environment(const std::string& library_path) {
  return {"CUDA_INJECTION64_PATH=" + library_path};
}

}  // namespace tprof
