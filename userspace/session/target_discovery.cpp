#include "userspace/session/target_discovery.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "userspace/cli/error.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;

std::vector<pid_t> all_processes() {
  std::vector<pid_t> pids;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) pids.push_back(std::stoi(name));
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

// The parent from /proc/PID/stat: the field after the parenthesized command name, which may
// itself hold spaces and parentheses. 0 once the process is gone.
pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto name_end = line.rfind(')');
  if (name_end == std::string::npos || name_end + 4 >= line.size()) return 0;
  return static_cast<pid_t>(std::atoi(line.c_str() + name_end + 4));  // ") S <ppid>"
}

std::string command_line(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/cmdline");
  std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  while (!text.empty() && text.back() == '\0') text.pop_back();
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

std::set<pid_t> self_and_ancestors() {
  std::set<pid_t> lineage;
  for (pid_t pid = ::getpid(); pid > 0 && lineage.insert(pid).second;) pid = parent_of(pid);
  return lineage;
}

}  // namespace

std::vector<pid_t> processes_matching(const std::string& pattern) {
  std::regex expression;
  try {
    expression = std::regex(pattern);
  } catch (const std::regex_error& error) {
    throw Error("--match " + pattern + " is not a valid regular expression: " + error.what());
  }
  const std::set<pid_t> excluded = self_and_ancestors();
  std::vector<pid_t> matching;
  for (const pid_t pid : all_processes()) {
    if (excluded.contains(pid)) continue;
    const std::string command = command_line(pid);
    if (!command.empty() && std::regex_search(command, expression)) matching.push_back(pid);
  }
  return matching;
}

std::vector<pid_t> descendants_of(const std::set<pid_t>& roots) {
  std::map<pid_t, std::vector<pid_t>> children;
  for (const pid_t pid : all_processes()) children[parent_of(pid)].push_back(pid);
  std::vector<pid_t> descendants;
  std::vector<pid_t> pending(roots.begin(), roots.end());
  while (!pending.empty()) {
    const pid_t parent = pending.back();
    pending.pop_back();
    for (const pid_t child : children[parent]) {
      if (roots.contains(child)) continue;
      descendants.push_back(child);
      pending.push_back(child);
    }
  }
  std::sort(descendants.begin(), descendants.end());
  descendants.erase(std::unique(descendants.begin(), descendants.end()), descendants.end());
  return descendants;
}

}  // namespace tprof
