// An output file that appears complete or not at all: data goes to "<path>.tmp" and is
// renamed onto <path> by commit(). A ".gz" path is written gzip-compressed.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace tprof::exporters {

class OutputFile {
 public:
  // Creates "<path>.tmp" now, so that an unwritable destination is reported before any work.
  // Throws std::runtime_error("cannot write <path>: <reason>").
  explicit OutputFile(std::string path);
  ~OutputFile();  // removes the temp file unless committed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  void write(std::string_view bytes);  // buffered; throws on I/O error
  void commit();                       // flush, close, fsync, rename; throws on error
  const std::string& path() const { return path_; }

 private:
  struct Sink;
  std::string path_;
  std::string temp_path_;
  std::unique_ptr<Sink> sink_;
  bool committed_ = false;
};

}  // namespace tprof::exporters
