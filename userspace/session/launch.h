// `tprof record -- CMD`: the environment that lets the command's GPU activity reach tprof.
// Starting and holding the command is userspace/session/process_holder.h's.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tprof {

// libtprof_cupti.so beside the tprof binary; nullopt where it was not built (no CUPTI headers).
std::optional<std::string> injection_library_path();

// The variables a deployment sets so that its processes load the injection library at cuInit.
std::vector<std::string> injection_environment(const std::string& library_path);

}  // namespace tprof
