// What tprof tells the person at the terminal, on stderr: progress lines, a live status
// line while recording (only on a TTY), and the end-of-run summary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "userspace/cli/op_summary.h"

namespace tprof {

class Console {
 public:
  // `label` (one target's, "pid 1234", among several) prefixes every line.
  explicit Console(bool quiet, std::string label = "");

  // "tprof: [<label>: ]<message>" on its own line (suppressed by --quiet).
  void line(const std::string& message);
  // Lines from now on wait until release_lines() prints them or discard_lines() drops them:
  // what planning warns of a target that then turns out to have exited meanwhile is noise.
  void hold_lines() { holding_ = true; }
  void release_lines();
  void discard_lines();
  // Rewrites the status line in place; a no-op unless stderr is a TTY.
  // "recording 12.3 s | 1,234 events | 0 dropped | probes ~81% of its CPU | Ctrl-C to stop":
  // `probe_share`, the estimate of what the probes take of the target's CPU, where known.
  void status(double elapsed_s, uint64_t records, uint64_t dropped, std::optional<double> probe_share = std::nullopt);
  void clear_status();
  // The end-of-run table (op_summary.h), under a title naming whose it is among several.
  void summary_table(const std::string& table);

 private:
  bool quiet_;
  std::string label_;
  bool interactive_;
  bool holding_ = false;
  std::vector<std::string> held_;
  // One terminal: a line from any console clears the status line any of them drew.
  static inline bool status_shown_ = false;
};

// 1234567 -> "1,234,567"
std::string group_thousands(uint64_t value);

}  // namespace tprof
