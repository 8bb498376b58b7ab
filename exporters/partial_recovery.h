// `tprof recover`: turns the "<file>.partial" a killed tprof left into a valid trace or
// Execution Trace holding everything up to its last flush, marked as recovered.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace tprof::exporters {

struct RecoveredFile {
  std::string path;         // the file written: the partial's path without ".partial"
  bool execution_trace = false;
  uint64_t events = 0;      // complete event (or node) lines kept
  uint64_t dropped = 0;     // complete lines among the events that were not JSON objects (damage)
  uint64_t repaired = 0;    // lines kept with bytes that were not UTF-8 replaced by U+FFFD
};

// Reads `partial_path` (gzip-compressed when the final name ends in ".gz"; a stream cut short
// is read up to where it can be inflated), keeps its header and every complete event line
// that is a JSON object (invalid UTF-8 replaced), appends the ending the writer would have
// written, writes "<final>" with `mode`, and removes the partial file. The output is valid
// JSON whatever the input. Throws std::runtime_error("cannot recover <path>: <reason>"): not a
// ".partial" name, not a regular file, locked by a running tprof, neither tprof's trace nor
// its ET, a damaged header, nothing past the header, a line or an inflated size past the
// bounds tprof's files keep far within, or "<final>" exists.
RecoveredFile recover_partial_file(const std::string& partial_path, mode_t mode);

}  // namespace tprof::exporters
