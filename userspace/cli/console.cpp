#include "userspace/cli/console.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

namespace tprof {

std::string group_thousands(uint64_t value) {
  const std::string digits = std::to_string(value);
  std::string grouped;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

Console::Console(bool quiet, std::string label)
    : quiet_(quiet), label_(std::move(label)), interactive_(!quiet && ::isatty(STDERR_FILENO)) {}

void Console::line(const std::string& message) {
  if (quiet_) return;
  if (holding_) {
    held_.push_back(message);
    return;
  }
  clear_status();
  if (label_.empty()) {
    std::fprintf(stderr, "tprof: %s\n", message.c_str());
  } else {
    std::fprintf(stderr, "tprof: %s: %s\n", label_.c_str(), message.c_str());
  }
}

void Console::release_lines() {
  holding_ = false;
  std::vector<std::string> held = std::exchange(held_, {});
  for (const std::string& message : held) line(message);
}

void Console::discard_lines() {
  holding_ = false;
  held_.clear();
}

void Console::status(double elapsed_s, uint64_t records, uint64_t dropped, std::optional<double> probe_share) {
  if (!interactive_) return;
  char share[48] = "";
  if (probe_share) std::snprintf(share, sizeof(share), " | probes ~%.0f%% of its CPU", 100.0 * *probe_share);
  std::fprintf(stderr, "\r\033[Ktprof: recording %.1f s | %s events | %s dropped%s | Ctrl-C to stop", elapsed_s,
               group_thousands(records).c_str(), group_thousands(dropped).c_str(), share);
  std::fflush(stderr);
  status_shown_ = true;
}

void Console::clear_status() {
  if (!status_shown_) return;
  std::fprintf(stderr, "\r\033[K");
  status_shown_ = false;
}

void Console::summary_table(const std::string& table) {
  if (quiet_ || table.empty()) return;
  clear_status();
  if (!label_.empty()) std::fprintf(stderr, "tprof: %s: ops by self CPU time\n", label_.c_str());
  std::fputs(table.c_str(), stderr);
}

}  // namespace tprof
