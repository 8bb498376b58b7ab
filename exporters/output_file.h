// An output file that appears complete or not at all: data goes to "<path>.partial" as it is
// written, flush() makes it readable there (a killed tprof leaves it for `tprof recover`), and
// commit() renames it onto <path>. A ".gz" path is written gzip-compressed.
//
// tprof runs as root and may write into a directory others can write to: the temp file is
// created new (O_EXCL), never through a link (O_NOFOLLOW), readable by its owner only unless
// asked otherwise (traces hold paths, arguments and code), and the rename replaces whatever
// is at <path>, a link included, without following it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <string_view>

namespace tprof::exporters {

class OutputFile {
 public:
  static constexpr mode_t kDefaultMode = 0600;

  static constexpr std::string_view kPartialSuffix = ".partial";

  // Creates "<path><temp_suffix>" now, with exactly `mode`, so that an unwritable destination
  // is reported before any work. Throws std::runtime_error("cannot write <path>: <reason>"),
  // also when that file already exists (as a file or a link).
  explicit OutputFile(std::string path, mode_t mode = kDefaultMode, std::string_view temp_suffix = kPartialSuffix);
  ~OutputFile();  // removes the temp file unless committed
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
  bool committed_ = false;
};

}  // namespace tprof::exporters
