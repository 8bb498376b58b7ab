// Process control for end-to-end tests: spawn a child with pipes, read its output line by line
// against deadlines, signal it, reap it with a timeout. Every child is killed and reaped when
// its owner goes out of scope, so a failing assertion never leaves a stray process behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tprof::test {

// An owned file descriptor, closed on destruction.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { reset(); }

  int get() const { return fd_; }
  bool is_open() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

// Lines from a pipe, each read against a deadline. Every line handed out is also kept, so a
// failure message can show everything the child said.
class LineReader {
 public:
  LineReader() = default;
  explicit LineReader(FileDescriptor fd) : fd_(std::move(fd)) {}

  // The next line without its '\n'; nullopt on timeout or at end of stream.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);

  // The first line containing `needle`, skipping (but keeping) the others; nullopt on timeout
  // or at end of stream.
  std::optional<std::string> read_line_containing(std::string_view needle,
                                                  std::chrono::milliseconds timeout);

  // Reads until end of stream; returns false if the deadline came first.
  bool read_to_end(std::chrono::milliseconds timeout);

  bool at_end() const { return at_end_ && pending_.empty(); }
  const std::vector<std::string>& lines_read() const { return lines_read_; }
  // lines_read() joined with '\n', for failure messages.
  std::string transcript() const;

 private:
  std::optional<std::string> take_pending_line();

  FileDescriptor fd_;
  std::string pending_;
  bool at_end_ = false;
  std::vector<std::string> lines_read_;
};

struct ExitStatus {
  bool exited_normally = false;  // false: killed by a signal
  int code = 0;                  // the exit code, or the signal number
  bool succeeded() const { return exited_normally && code == 0; }
  std::string describe() const;  // "exit code 3", "killed by signal 9 (Killed)"
};

struct SpawnOptions {
  std::vector<std::string> argv{};            // argv[0] is looked up in PATH
  bool pipe_stdin = false;                    // otherwise /dev/null
  bool pipe_stdout = false;                   // otherwise inherited
  bool pipe_stderr = false;                   // otherwise inherited
  std::filesystem::path working_directory{};  // empty: the test's own
};

// One child process. Not movable: it owns a pid that must be reaped exactly once.
class ChildProcess {
 public:
  explicit ChildProcess(SpawnOptions options);  // throws std::runtime_error if spawning fails
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();  // SIGKILL and reap if still running

  pid_t pid() const { return pid_; }
  const std::vector<std::string>& argv() const { return argv_; }
  LineReader& stdout_lines() { return stdout_; }
  LineReader& stderr_lines() { return stderr_; }

  // Throws std::runtime_error if stdin is not piped or the child closed it.
  void write_stdin(std::string_view text);
  void close_stdin() { stdin_.reset(); }

  // No-op once the child has been reaped (its pid may already belong to someone else).
  void send_signal(int signal_number);

  // The exit status once the child has exited; nullopt if it is still running at the deadline.
  std::optional<ExitStatus> wait_for_exit(std::chrono::milliseconds timeout);
  bool is_running() { return !wait_for_exit(std::chrono::milliseconds(0)).has_value(); }

 private:
  std::vector<std::string> argv_;
  pid_t pid_ = -1;
  std::optional<ExitStatus> exit_status_;
  FileDescriptor stdin_;
  LineReader stdout_;
  LineReader stderr_;
};

// Closes a target's stdin (the test workloads' signal to end) and waits for its exit: "" when it
// exited 0, otherwise how it ended. A target tprof recorded must end as it would have without
// it: a crash at its exit is harm too.
std::string unclean_exit_of(ChildProcess& target, std::chrono::milliseconds timeout);

// Runs a command to completion with its stdout captured (stderr inherited, so its diagnostics
// land in the test log). The status is nullopt if the command outlived the timeout; it has
// been killed then.
struct CommandResult {
  std::optional<ExitStatus> status;
  std::vector<std::string> stdout_lines;
};
CommandResult run_command(std::vector<std::string> argv, std::chrono::milliseconds timeout);

// A fresh directory (mkdtemp) removed with its contents on destruction.
class ScratchDirectory {
 public:
  explicit ScratchDirectory(
      const std::filesystem::path& parent = std::filesystem::temp_directory_path());
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory();

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tprof::test
