// `tprof record -- CMD`: starting a command with the CUPTI injection library set, so that its GPU
// activity reaches tprof, and waiting until there is torch in it to attach to.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace tprof {

// libtprof_cupti.so beside the tprof binary; nullopt where it was not built (no CUPTI headers).
std::optional<std::string> injection_library_path();

// The variables a deployment sets so that its processes load the injection library at cuInit.
std::vector<std::string> injection_environment(const std::string& library_path);

// Starts `command` (searched in PATH) with `environment` added to ours and no signal blocked.
// Throws tprof::Error if it cannot be started.
pid_t launch(const std::vector<std::string>& command, const std::vector<std::string>& environment);

// Waits until `pid` maps libtorch_cpu (true), or exits (false: its exit status is then left to
// wait_for_command), looking every few milliseconds.
bool wait_for_torch(pid_t pid);

// The command's exit status as a shell reports it (128 + signal for a killed one).
int wait_for_command(pid_t pid);

}  // namespace tprof
