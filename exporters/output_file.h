// An output file that appears complete or not at all: data goes to "<path>.partial" as it is
// written, flush() makes it readable there (a killed tprof leaves it for `tprof recover`), and
// commit() renames it onto <path>. A ".gz" path is written gzip-compressed.
//
// tprof runs as root and may write into a directory others can write to: the temp file is
// created new (O_EXCL), never through a link (O_NOFOLLOW), readable by its owner only unless
// asked otherwise (traces hold paths, arguments and code). Only a regular file is ever written
// or replaced: a device, directory, FIFO or link at <path> is refused (`-o /dev/null` must never
// replace the device node), and so is an existing file unless `replace_existing` (--force);
// the rename itself does not replace a file that appeared meanwhile.
//
// Nothing recorded is lost to a failure: a temp file that data reached (a flush, or a write
// that failed half way: a full disk) stays when the OutputFile goes without commit, and the
// error says where it is, for `tprof recover`. `keep_on_failure = false` makes the temp file
// scratch instead (recover's own output).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace tprof::exporters {

class OutputFile {
 public:
  static constexpr mode_t kDefaultMode = 0600;

  static constexpr std::string_view kPartialSuffix = ".partial";

  struct Options {
    mode_t mode = kDefaultMode;
    std::string_view temp_suffix = kPartialSuffix;
    bool replace_existing = false;  // a regular file at the path is replaced, not refused
    bool keep_on_failure = true;    // the temp file stays once data reached it (see above)
  };

  // Creates "<path><temp_suffix>" now, with exactly `mode`, so that an unwritable destination
  // is reported before any work. Throws std::runtime_error("cannot write <path>: <reason>"),
  // also when the temp file already exists (as a file or a link) and when <path> is not a
  // regular file, or exists and is not to be replaced.
  OutputFile(std::string path, const Options& options);
  explicit OutputFile(std::string path, mode_t mode = kDefaultMode) : OutputFile(std::move(path), Options{.mode = mode}) {}
  ~OutputFile();  // removes the temp file unless committed or kept (see above)
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view bytes);  // buffered; throws on I/O error
  void flush();                        // hands the buffer to the file; throws on I/O error
  void commit();                       // flush, close, fsync, rename; throws on error
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_path_; }

 private:
  struct Sink;
  std::string path_;
  std::string temp_path_;
  std::unique_ptr<Sink> sink_;
  bool replace_existing_;
  bool keep_on_failure_;
  bool committed_ = false;
};

}  // namespace tprof::exporters
