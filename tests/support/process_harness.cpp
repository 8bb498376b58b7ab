#include "tests/support/process_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <system_error>
#include <thread>

extern char** environ;

namespace tprof::test {
namespace {

using Clock = std::chrono::steady_clock;

std::chrono::milliseconds remaining_until(Clock::time_point deadline) {
  return std::max(std::chrono::milliseconds(0),
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
}

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

struct Pipe {
  FileDescriptor read_end;
  FileDescriptor write_end;
};

Pipe make_pipe() {
  // Close-on-exec: the child only gets the ends dup2'ed onto its stdio, never the parent's
  // ends (a leaked write end would keep the child's stdin open forever).
  std::array<int, 2> fds{};
  if (pipe2(fds.data(), O_CLOEXEC) != 0) throw_errno("pipe2");
  return {FileDescriptor(fds[0]), FileDescriptor(fds[1])};
}

// Writing to a child that already exited must fail with EPIPE, not kill the test binary.
void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

// posix_spawn's C objects, destroyed on every exit path.
class SpawnFileActions {
 public:
  SpawnFileActions() { posix_spawn_file_actions_init(&actions_); }
  ~SpawnFileActions() { posix_spawn_file_actions_destroy(&actions_); }
  SpawnFileActions(const SpawnFileActions&) = delete;
  SpawnFileActions& operator=(const SpawnFileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

class SpawnAttributes {
 public:
  SpawnAttributes() {
    posix_spawnattr_init(&attributes_);
    // The child starts with default dispositions and no blocked signals whatever the test
    // binary did (it ignores SIGPIPE), so SIGINT/SIGTERM reach tprof as they would from a shell.
    sigset_t defaults;
    sigemptyset(&defaults);
    for (const int signal_number : {SIGPIPE, SIGINT, SIGTERM, SIGHUP}) {
      sigaddset(&defaults, signal_number);
    }
    sigset_t no_blocked_signals;
    sigemptyset(&no_blocked_signals);
    posix_spawnattr_setsigdefault(&attributes_, &defaults);
    posix_spawnattr_setsigmask(&attributes_, &no_blocked_signals);
    posix_spawnattr_setflags(&attributes_, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attributes_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  const posix_spawnattr_t* get() const { return &attributes_; }

 private:
  posix_spawnattr_t attributes_;
};

ExitStatus decode_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return {true, WEXITSTATUS(wait_status)};
  return {false, WTERMSIG(wait_status)};
}

}  // namespace

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void FileDescriptor::reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

std::optional<std::string> LineReader::take_pending_line() {
  const auto newline = pending_.find('\n');
  if (newline == std::string::npos) {
    // A last line without '\n' still counts once the stream has ended.
    if (!at_end_ || pending_.empty()) return std::nullopt;
    std::string line = std::move(pending_);
    pending_.clear();
    lines_read_.push_back(line);
    return line;
  }
  std::string line = pending_.substr(0, newline);
  pending_.erase(0, newline + 1);
  lines_read_.push_back(line);
  return line;
}

std::optional<std::string> LineReader::read_line(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto line = take_pending_line()) return line;
    if (at_end_ || !fd_.is_open()) return std::nullopt;
    pollfd readable{.fd = fd_.get(), .events = POLLIN, .revents = 0};
    const int ready = poll(&readable, 1, static_cast<int>(remaining_until(deadline).count()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw_errno("poll");
    }
    if (ready == 0) return std::nullopt;  // deadline passed
    std::array<char, 4096> chunk{};
    const ssize_t count = read(fd_.get(), chunk.data(), chunk.size());
    if (count < 0) {
      if (errno == EINTR) continue;
      throw_errno("read");
    }
    if (count == 0) {
      at_end_ = true;
    } else {
      pending_.append(chunk.data(), static_cast<std::size_t>(count));
    }
  }
}

std::optional<std::string> LineReader::read_line_containing(std::string_view needle,
                                                            std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (auto line = read_line(remaining_until(deadline))) {
    if (line->find(needle) != std::string::npos) return line;
  }
  return std::nullopt;
}

bool LineReader::read_to_end(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!at_end()) {
    if (!read_line(remaining_until(deadline)) && !at_end()) return false;
  }
  return true;
}

std::string LineReader::transcript() const {
  std::string text;
  for (const auto& line : lines_read_) text += line + '\n';
  return text;
}

std::string ExitStatus::describe() const {
  if (exited_normally) return "exit code " + std::to_string(code);
  return "killed by signal " + std::to_string(code) + " (" + strsignal(code) + ")";
}

std::string unclean_exit_of(ChildProcess& target, std::chrono::milliseconds timeout) {
  target.close_stdin();
  const std::optional<ExitStatus> status = target.wait_for_exit(timeout);
  if (!status) return "the target did not exit within " + std::to_string(timeout.count()) + " ms";
  return status->succeeded() ? "" : "the target ended with " + status->describe();
}

ChildProcess::ChildProcess(SpawnOptions options) : argv_(std::move(options.argv)) {
  if (argv_.empty()) throw std::invalid_argument("ChildProcess: empty argv");
  ignore_sigpipe_once();

  SpawnFileActions actions;
  std::optional<Pipe> stdin_pipe, stdout_pipe, stderr_pipe;
  if (options.pipe_stdin) {
    stdin_pipe = make_pipe();
    posix_spawn_file_actions_adddup2(actions.get(), stdin_pipe->read_end.get(), STDIN_FILENO);
  } else {
    posix_spawn_file_actions_addopen(actions.get(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  if (options.pipe_stdout) {
    stdout_pipe = make_pipe();
    posix_spawn_file_actions_adddup2(actions.get(), stdout_pipe->write_end.get(), STDOUT_FILENO);
  }
  if (options.pipe_stderr) {
    stderr_pipe = make_pipe();
    posix_spawn_file_actions_adddup2(actions.get(), stderr_pipe->write_end.get(), STDERR_FILENO);
  }
  if (!options.working_directory.empty()) {
    posix_spawn_file_actions_addchdir_np(actions.get(), options.working_directory.c_str());
  }

  std::vector<char*> raw_argv;
  for (auto& argument : argv_) raw_argv.push_back(argument.data());
  raw_argv.push_back(nullptr);
  SpawnAttributes attributes;
  const int error =
      posix_spawnp(&pid_, raw_argv[0], actions.get(), attributes.get(), raw_argv.data(), environ);
  if (error != 0) {
    throw std::system_error(error, std::generic_category(), "posix_spawnp " + argv_[0]);
  }

  // The child's ends close here, so end of stream means the child (and everything it
  // spawned with those descriptors) is gone.
  if (stdin_pipe) stdin_ = std::move(stdin_pipe->write_end);
  if (stdout_pipe) stdout_ = LineReader(std::move(stdout_pipe->read_end));
  if (stderr_pipe) stderr_ = LineReader(std::move(stderr_pipe->read_end));
}

ChildProcess::~ChildProcess() {
  if (exit_status_) return;
  kill(pid_, SIGKILL);
  int wait_status = 0;
  while (waitpid(pid_, &wait_status, 0) < 0 && errno == EINTR) {
  }
}

void ChildProcess::write_stdin(std::string_view text) {
  if (!stdin_.is_open()) throw std::logic_error("write_stdin: stdin is not an open pipe");
  while (!text.empty()) {
    const ssize_t written = write(stdin_.get(), text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      throw_errno("write to stdin of " + argv_[0]);
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

void ChildProcess::send_signal(int signal_number) {
  if (!exit_status_) kill(pid_, signal_number);
}

std::optional<ExitStatus> ChildProcess::wait_for_exit(std::chrono::milliseconds timeout) {
  // Polling waitpid keeps this free of SIGCHLD handlers, which would be process-global state
  // shared with whatever else the test binary does.
  constexpr auto kPollInterval = std::chrono::milliseconds(10);
  const auto deadline = Clock::now() + timeout;
  while (!exit_status_) {
    int wait_status = 0;
    const pid_t reaped = waitpid(pid_, &wait_status, WNOHANG);
    if (reaped == pid_) {
      exit_status_ = decode_wait_status(wait_status);
      break;
    }
    if (reaped < 0 && errno != EINTR) throw_errno("waitpid");
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(
        std::min<std::chrono::milliseconds>(kPollInterval, remaining_until(deadline)));
  }
  return exit_status_;
}

CommandResult run_command(std::vector<std::string> argv, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  ChildProcess command({.argv = std::move(argv), .pipe_stdout = true});
  CommandResult result;
  if (command.stdout_lines().read_to_end(remaining_until(deadline))) {
    result.status = command.wait_for_exit(remaining_until(deadline));
  }
  result.stdout_lines = command.stdout_lines().lines_read();
  return result;  // a command still running is killed and reaped by ~ChildProcess
}

ScratchDirectory::ScratchDirectory(const std::filesystem::path& parent) {
  std::string name_template = (parent / "tprof-e2e-XXXXXX").string();
  if (mkdtemp(name_template.data()) == nullptr) throw_errno("mkdtemp " + name_template);
  path_ = name_template;
}

ScratchDirectory::~ScratchDirectory() {
  std::error_code ignored;  // best effort: a destructor cannot report, and /tmp is reaped anyway
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace tprof::test
