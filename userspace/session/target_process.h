// The process being profiled, seen through /proc. Files of the target are opened through
// /proc/PID/root so that a target in another mount namespace (a container sharing our PID
// namespace) resolves its own libraries.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "userspace/loader/unique_fd.h"

namespace tprof {

struct MappedLibrary {
  std::string path_in_target;  // as in /proc/PID/maps: "/usr/lib/.../libtorch_cpu.so.1.13"
  std::string host_path;       // the same file opened from here: usually "/proc/PID/root" + path_in_target
  // Where its first mapping (the ELF header's page) starts: a shared library's load bias,
  // since its first segment is linked at address 0.
  uint64_t load_address = 0;
};

class TargetProcess {
 public:
  // Throws tprof::Error("no such process: PID") if it does not exist.
  explicit TargetProcess(pid_t pid);

  pid_t pid() const { return pid_; }
  uid_t uid() const { return uid_; }
  const std::string& name() const { return name_; }  // /proc/PID/comm
  // Its pid in its own PID namespace (a container's), as torch's profiler would write it;
  // pid() where it shares ours.
  pid_t namespace_pid() const { return namespace_pid_; }

  // The first mapping whose file name starts with `file_name_prefix` ("libtorch_cpu.so").
  std::optional<MappedLibrary> find_mapped_library(const std::string& file_name_prefix) const;
  // The first mapping of every file whose path in the target `wanted` accepts. A file that
  // cannot be opened from here is left out.
  std::vector<MappedLibrary> mapped_libraries(const std::function<bool(std::string_view path_in_target)>& wanted) const;

  // /proc/PID/task/TID/comm, or "" once the thread is gone.
  std::string thread_name(uint32_t tid) const;

  // The CPU time its threads have used, user and system, in ns; none once it is gone.
  std::optional<uint64_t> cpu_time_ns() const;

  // A pidfd that becomes readable when the process exits.
  const UniqueFd& exit_notifier() const { return pidfd_; }
  bool has_exited() const;

  // A variable of the environment the process started with (/proc/PID/environ); none if
  // absent or unreadable.
  std::optional<std::string> environment_variable(const std::string& name) const;

 private:
  pid_t pid_;
  uid_t uid_ = 0;
  std::string name_;
  pid_t namespace_pid_ = 0;
  UniqueFd pidfd_;
};

}  // namespace tprof
