#include "userspace/session/target_process.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <vector>

#include "userspace/cli/error.h"

namespace tprof {
namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A process's ids from its PID namespace down ("NSpid" of /proc/PID/status): first as the
// namespace of that /proc sees it, last as the process sees itself. Empty if unreadable.
std::vector<pid_t> namespace_pids(const std::string& proc_pid_dir) {
  std::ifstream status(proc_pid_dir + "/status");
  std::string line;
  std::vector<pid_t> pids;
  while (std::getline(status, line)) {
    if (!line.starts_with("NSpid:")) continue;
    std::istringstream fields(line.substr(6));
    for (pid_t pid = 0; fields >> pid;) pids.push_back(pid);
    break;
  }
  return pids;
}

}  // namespace

TargetProcess::TargetProcess(pid_t pid) : pid_(pid) {
  const std::string proc_dir = "/proc/" + std::to_string(pid);
  struct stat st{};
  if (pid <= 0 || ::stat(proc_dir.c_str(), &st) != 0) throw Error("no such process: " + std::to_string(pid));
  uid_ = st.st_uid;
  name_ = read_first_line(proc_dir + "/comm");
  const std::vector<pid_t> pids = namespace_pids(proc_dir);
  namespace_pid_ = pids.empty() ? pid : pids.back();
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    if (errno == ESRCH) throw Error("no such process: " + std::to_string(pid));
    throw Error(errno_message("pidfd_open(" + std::to_string(pid) + ")", errno));
  }
  pidfd_ = UniqueFd(fd);
}

namespace {

// One line of /proc/PID/maps: "address perms offset dev inode pathname".
struct MapsLine {
  uint64_t start = 0, end = 0;
  ino_t inode = 0;
  std::string path;
};

MapsLine parse_maps_line(const std::string& line) {
  std::istringstream fields(line);
  std::string address, perms, offset, device;
  MapsLine parsed;
  fields >> address >> perms >> offset >> device >> parsed.inode;
  std::getline(fields >> std::ws, parsed.path);
  const auto dash = address.find('-');
  if (dash == std::string::npos) return {};
  parsed.start = std::strtoull(address.c_str(), nullptr, 16);
  parsed.end = std::strtoull(address.c_str() + dash + 1, nullptr, 16);
  return parsed;
}

// maps shows the path as seen from *our* root. For a target in another mount namespace
// (a container) that is its own path, reachable through /proc/PID/root; for a chrooted
// target it is already our path. The mapping's own entry in map_files always works but
// names a magic link. The first candidate that is the very file mapped; none if none is.
std::optional<MappedLibrary> open_mapped(const std::string& proc_dir, const MapsLine& mapping) {
  // map_files names are the range without maps' zero padding: "400000-420000".
  char range[64];
  std::snprintf(range, sizeof(range), "%llx-%llx", static_cast<unsigned long long>(mapping.start),
                static_cast<unsigned long long>(mapping.end));
  for (const std::string& candidate : {proc_dir + "/root" + mapping.path, mapping.path, proc_dir + "/map_files/" + range}) {
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && st.st_ino == mapping.inode)
      return MappedLibrary{mapping.path, candidate, mapping.start};
  }
  return std::nullopt;
}

}  // namespace

std::optional<MappedLibrary> TargetProcess::find_mapped_library(const std::string& file_name_prefix) const {
  const std::string proc_dir = "/proc/" + std::to_string(pid_);
  const std::string maps_path = proc_dir + "/maps";
  std::ifstream maps(maps_path);
  if (!maps) throw Error(errno_message("cannot read " + maps_path, errno));
  std::string line;
  while (std::getline(maps, line)) {
    const MapsLine mapping = parse_maps_line(line);
    if (mapping.path.empty() || mapping.path[0] != '/') continue;
    const auto slash = mapping.path.rfind('/');
    if (mapping.path.compare(slash + 1, file_name_prefix.size(), file_name_prefix) != 0) continue;
    if (auto library = open_mapped(proc_dir, mapping)) return library;
    throw Error("cannot open " + mapping.path + " of process " + std::to_string(pid_) +
                " (through /proc/PID/root or /proc/PID/map_files)");
  }
  return std::nullopt;
}

std::vector<MappedLibrary> TargetProcess::mapped_libraries(
    const std::function<bool(std::string_view path_in_target)>& wanted) const {
  const std::string proc_dir = "/proc/" + std::to_string(pid_);
  std::ifstream maps(proc_dir + "/maps");
  std::vector<MappedLibrary> libraries;
  std::string line, previous_path;
  while (std::getline(maps, line)) {
    MapsLine mapping = parse_maps_line(line);
    // A file's consecutive mappings are listed once, by the first (its ELF header's page).
    if (mapping.path.empty() || mapping.path[0] != '/' || mapping.path == previous_path) continue;
    previous_path = mapping.path;
    if (!wanted(mapping.path)) continue;
    if (auto library = open_mapped(proc_dir, mapping)) libraries.push_back(std::move(*library));
  }
  return libraries;
}

bool TargetProcess::has_exited() const {
  pollfd exit{.fd = pidfd_.get(), .events = POLLIN, .revents = 0};
  return ::poll(&exit, 1, 0) > 0;
}

std::optional<std::string> TargetProcess::environment_variable(const std::string& name) const {
  std::ifstream environ("/proc/" + std::to_string(pid_) + "/environ");
  const std::string prefix = name + "=";
  for (std::string entry; std::getline(environ, entry, '\0');)
    if (entry.starts_with(prefix)) return entry.substr(prefix.size());
  return std::nullopt;
}

// The process's CPU-time clock sums its threads' scheduler run time in ns, where /proc/PID/stat's
// utime and stime come in clock ticks (10 ms): too coarse for --max-overhead's readings, 20 ms
// apart.
std::optional<uint64_t> TargetProcess::cpu_time_ns() const {
  clockid_t clock{};
  timespec now{};
  if (::clock_getcpuclockid(pid_, &clock) != 0 || ::clock_gettime(clock, &now) != 0) return std::nullopt;
  return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(now.tv_nsec);
}

std::string TargetProcess::thread_name(uint32_t tid) const {
  return read_first_line("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(tid) + "/comm");
}

}  // namespace tprof
