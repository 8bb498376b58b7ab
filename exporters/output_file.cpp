#include "exporters/output_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "exporters/file_descriptor.h"

namespace tprof::exporters {
namespace {

// Large enough that write(2) and deflate() see big chunks; flush() empties it at least once a
// second while recording.
constexpr size_t kBufferBytes = 1 << 20;

// Compression runs beside the recording and competes with it for CPU. On a 10M-event trace
// level 1 took a third of the time of zlib's default level 6 for output only 15% larger (both
// ~10x smaller than JSON).
constexpr int kGzipLevel = 1;

// windowBits 15 + 16: the largest window, wrapped in a gzip (not zlib) header and trailer.
constexpr int kGzipWindowBits = 15 + 16;
constexpr int kZlibMemLevel = 8;  // zlib's default

[[noreturn]] void throw_cannot_write(const std::string& path, std::string_view reason) {
  throw std::runtime_error("cannot write " + path + ": " + std::string(reason));
}

[[noreturn]] void throw_cannot_write_errno(const std::string& path, int error_number) {
  throw_cannot_write(path, std::strerror(error_number));
}

bool has_gzip_suffix(std::string_view path) { return path.ends_with(".gz"); }

// Only a regular file is written or replaced, and an existing one only when asked.
void check_destination(const std::string& path, bool replace_existing) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return;
    throw_cannot_write_errno(path, errno);
  }
  if (!S_ISREG(status.st_mode))
    throw_cannot_write(path, "it is not a regular file (a device, directory, FIFO, socket or link): tprof writes "
                             "only regular files");
  if (!replace_existing) throw_cannot_write(path, "it already exists (--force replaces it)");
}

// Renames `from` onto `to` unless something is at `to` by then (RENAME_NOREPLACE; a file system
// without it gets link and unlink, which refuse likewise). Returns errno, 0 on success.
int rename_without_replacing(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  if (::link(from.c_str(), to.c_str()) != 0) return errno;
  ::unlink(from.c_str());
  return 0;
}


}  // namespace

// Buffers bytes, optionally gzip-compresses them with a streaming deflate, and writes them to
// the temp file. Every error throws "cannot write <final path>: <reason>".
//
// Compression is the largest cost of a streamed trace (about as much as building the JSON),
// so full buffers go to a writer thread that deflates and writes them while the recording
// goes on; at most kQueuedBuffers wait, after which write() waits for it. An error in the
// writer thread is thrown by the next write(), flush() or finish().
struct OutputFile::Sink {
  Sink(const std::string& final_path, const std::string& temp_path, FileDescriptor fd, bool gzip, bool kept)
      : final_path_(final_path), temp_path_(temp_path), fd_(std::move(fd)), gzip_(gzip), kept_(kept) {
    pending_.reserve(kBufferBytes);
    if (gzip_) {
      const int status = deflateInit2(&deflater_, kGzipLevel, Z_DEFLATED, kGzipWindowBits,
                                      kZlibMemLevel, Z_DEFAULT_STRATEGY);
      if (status != Z_OK) throw_cannot_write(final_path_, zError(status));
      compressed_.resize(kBufferBytes);
      start_writer();
    }
  }

  ~Sink() {
    if (writer_.joinable()) {
      enqueue({std::string(), kStop}, /*rethrow=*/false);
      writer_.join();
    }
    if (gzip_) deflateEnd(&deflater_);
  }

  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  // Whether any byte reached the file: then it holds something of the recording.
  bool reached_file() const { return reached_file_.load(); }

  void write(std::string_view bytes) {
    pending_.append(bytes);
    if (pending_.size() >= kBufferBytes) hand_over(Z_NO_FLUSH);
  }

  // Hands everything so far to the file and waits until it is there; gzip output is
  // sync-flushed, so that a reader can inflate all of it even if the stream never gets its end.
  void flush() {
    hand_over(Z_SYNC_FLUSH);
    if (!writer_.joinable()) return;
    std::unique_lock lock(mutex_);
    room_.wait(lock, [&] { return done_jobs_ == queued_jobs_ || writer_error_; });
    rethrow_writer_error_locked();
  }

  // Writes out everything, ends the gzip stream and fsyncs, so that the rename that follows
  // publishes complete data.
  void finish() {
    hand_over(Z_FINISH);
    if (writer_.joinable()) {
      enqueue({std::string(), kStop}, /*rethrow=*/true);
      writer_.join();
      rethrow_writer_error();
    }
    if (::fsync(fd_.get()) != 0) throw_write_failed(errno);
  }

  // After the rename: the lock goes with the descriptor, so `tprof recover` never sees a
  // finished .partial unlocked.
  void close() {
    if (const int error = fd_.close(); error != 0) throw_write_failed(error);
  }

 private:
  static constexpr int kStop = -1;
  static constexpr size_t kQueuedBuffers = 4;

  struct Job {
    std::string bytes;
    int flush_mode;  // Z_NO_FLUSH, Z_SYNC_FLUSH, Z_FINISH, or kStop
  };

  void hand_over(int flush_mode) {
    if (!gzip_) {
      write_to_file(pending_.data(), pending_.size());
      pending_.clear();
      return;
    }
    std::string full;
    full.reserve(kBufferBytes);
    full.swap(pending_);
    enqueue({std::move(full), flush_mode}, /*rethrow=*/true);
  }

  // The writer thread starts with every signal blocked: a process-directed signal (Ctrl-C)
  // must reach the thread that waits for it (a signalfd), never this one.
  void start_writer() {
    sigset_t all;
    sigset_t previous;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &previous);
    writer_ = std::thread([this] { run_writer(); });
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  }

  void enqueue(Job job, bool rethrow) {
    {
      std::unique_lock lock(mutex_);
      room_.wait(lock, [&] { return jobs_.size() < kQueuedBuffers || writer_error_; });
      if (rethrow) rethrow_writer_error_locked();
      jobs_.push_back(std::move(job));
      ++queued_jobs_;
    }
    work_.notify_one();
  }

  void run_writer() {
    bool failed = false;  // after an error, jobs are only counted: the file is lost anyway
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        work_.wait(lock, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      if (job.flush_mode == kStop) return;
      std::exception_ptr error;
      try {
        if (!failed) deflate_to_file(job.bytes, job.flush_mode);
      } catch (...) {
        error = std::current_exception();
        failed = true;
      }
      {
        std::lock_guard lock(mutex_);
        if (error && !writer_error_) writer_error_ = error;
        ++done_jobs_;
      }
      room_.notify_all();
    }
  }

  void rethrow_writer_error() {
    std::lock_guard lock(mutex_);
    rethrow_writer_error_locked();
  }
  void rethrow_writer_error_locked() {
    if (writer_error_) std::rethrow_exception(writer_error_);
  }

  // Z_FINISH also flushes the deflater's internal state and writes the gzip trailer.
  void deflate_to_file(std::string& bytes, int flush_mode) {
    deflater_.next_in = reinterpret_cast<Bytef*>(bytes.data());
    deflater_.avail_in = static_cast<uInt>(bytes.size());
    int status = Z_OK;
    do {
      deflater_.next_out = reinterpret_cast<Bytef*>(compressed_.data());
      deflater_.avail_out = static_cast<uInt>(compressed_.size());
      status = deflate(&deflater_, flush_mode);
      if (status == Z_STREAM_ERROR) throw_cannot_write(final_path_, "zlib deflate failed");
      write_to_file(compressed_.data(), compressed_.size() - deflater_.avail_out);
      // Z_NO_FLUSH and Z_SYNC_FLUSH are done once the input is consumed and the output did not
      // fill up; Z_FINISH only when deflate reports the end of the stream.
    } while (flush_mode == Z_FINISH ? status != Z_STREAM_END : deflater_.avail_out == 0);
  }

  void write_to_file(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t written = ::write(fd_.get(), data, size);
      if (written < 0) {
        if (errno == EINTR) continue;
        throw_write_failed(errno);
      }
      if (written > 0) reached_file_.store(true);
      data += written;
      size -= static_cast<size_t>(written);
    }
  }

  // A full disk or an I/O error: nothing more is written, and what the file holds stays (the
  // OutputFile keeps it) for `tprof recover`, which the message says.
  [[noreturn]] void throw_write_failed(int error_number) const {
    std::string reason = std::strerror(error_number);
    if (kept_ && reached_file())
      reason += "; what was recorded so far is kept in " + temp_path_ +
                " and the recording's other .partial files: `tprof recover` them once there is room";
    throw_cannot_write(final_path_, reason);
  }

  const std::string& final_path_;
  const std::string& temp_path_;
  FileDescriptor fd_;
  const bool gzip_;
  const bool kept_;  // the temp file stays after a failure
  std::atomic<bool> reached_file_{false};
  std::string pending_;           // bytes not yet handed over
  // The writer thread's (gzip only).
  z_stream deflater_{};
  std::vector<char> compressed_;  // deflate output staging
  std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable room_;
  std::deque<Job> jobs_;
  uint64_t queued_jobs_ = 0;  // data jobs handed over, and those written
  uint64_t done_jobs_ = 0;
  std::exception_ptr writer_error_;
  std::thread writer_;
};

OutputFile::OutputFile(std::string path, const Options& options)
    : path_(std::move(path)),
      temp_path_(path_ + std::string(options.temp_suffix)),
      replace_existing_(options.replace_existing),
      keep_on_failure_(options.keep_on_failure) {
  check_destination(path_, replace_existing_);
  FileDescriptor fd(::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, options.mode));
  if (!fd.valid()) {
    // Only a .partial file is for `tprof recover`; recover's own temp file is scratch.
    const std::string_view remedy = options.temp_suffix == kPartialSuffix ? "`tprof recover` or remove it" : "remove it";
    if (errno == EEXIST)
      throw_cannot_write(path_, temp_path_ + " already exists (another tprof writing there, a link, or what a "
                                             "killed tprof left: " + std::string(remedy) + ")");
    throw_cannot_write_errno(path_, errno);
  }
  // Held until the file is closed (the gzip writer thread writes through this descriptor too),
  // so that `tprof recover` refuses a file still being written; it dies with the process. A file
  // system without locks only loses that protection. Blocking: a recover that locked the file
  // just created finds it empty, and lets go at once.
  ::flock(fd.get(), LOCK_EX);
  try {
    // The umask may have taken bits from `mode`; --mode means exactly that.
    if (::fchmod(fd.get(), options.mode) != 0) throw_cannot_write_errno(path_, errno);
    sink_ = std::make_unique<Sink>(path_, temp_path_, std::move(fd), has_gzip_suffix(path_), keep_on_failure_);
  } catch (...) {
    ::unlink(temp_path_.c_str());
    throw;
  }
}

OutputFile::~OutputFile() {
  const bool keep = committed_ || (keep_on_failure_ && sink_ && sink_->reached_file());
  sink_.reset();
  if (!keep) ::unlink(temp_path_.c_str());
}

void OutputFile::write(std::string_view bytes) {
  if (committed_) throw std::logic_error("write to committed output file " + path_);
  sink_->write(bytes);
}

void OutputFile::flush() {
  if (committed_) throw std::logic_error("flush of committed output file " + path_);
  sink_->flush();
}

// A file that appeared at the path while recording is not replaced (nor, with --force, anything
// but a regular file): the recording stays in the temp file, which the error names.
void OutputFile::commit() {
  if (committed_) throw std::logic_error("output file committed twice: " + path_);
  sink_->finish();
  int error = 0;
  if (replace_existing_) {
    check_destination(path_, /*replace_existing=*/true);
    if (::rename(temp_path_.c_str(), path_.c_str()) != 0) error = errno;
  } else {
    error = rename_without_replacing(temp_path_, path_);
  }
  if (error != 0) {
    std::string reason = error == EEXIST ? "a file appeared there while recording" : std::strerror(error);
    if (keep_on_failure_) reason += "; the recording is complete in " + temp_path_;
    throw_cannot_write(path_, reason);
  }
  committed_ = true;
  sink_->close();
}

}  // namespace tprof::exporters
