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
};

// Reads `partial_path` (gzip-compressed when the final name ends in ".gz"; a stream cut short
// is read up to where it can be inflated), keeps its header and every complete event line,
// appends the ending the writer would have written, writes "<final>" with `mode`, and removes
// the partial file. Throws std::runtime_error with a one-line reason: not a ".partial" name, a
// file that is neither tprof's trace nor its ET, nothing past the header, or "<final>" exists.
RecoveredFile recover_partial_file(const std::string& partial_path, mode_t mode);

}  // namespace tprof::exporters
