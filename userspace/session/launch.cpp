#include "userspace/session/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "userspace/cli/error.h"
#include "userspace/session/target_process.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;

constexpr int kTorchPollPeriodMs = 5;
// libtorch_cpu is mapped before the loader has finished with it; torch's Python extension,
// loaded after it, says it is done. A C++ program has none: it gets this long.
constexpr auto kLoaderGrace = std::chrono::seconds(1);

// Waits up to kTorchPollPeriodMs for the process to exit; whether it did.
bool exits_within_poll(const TargetProcess& target) {
  pollfd exit_notifier{.fd = target.exit_notifier().get(), .events = POLLIN, .revents = 0};
  return ::poll(&exit_notifier, 1, kTorchPollPeriodMs) > 0;
}

}  // namespace

std::optional<std::string> injection_library_path() {
  std::error_code error;
  const fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return std::nullopt;
  const fs::path library = self.parent_path() / "libtprof_cupti.so";
  if (!fs::exists(library, error)) return std::nullopt;
  return library.string();
}

std::vector<std::string> injection_environment(const std::string& library_path) {
  return {"CUDA_INJECTION64_PATH=" + library_path};
}

pid_t launch(const std::vector<std::string>& command, const std::vector<std::string>& environment) {
  // Reported through the pipe: exec's errno, so that "no such command" is tprof's error.
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) throw Error(errno_message("cannot start " + command.front(), errno));
  const pid_t child = fork();
  if (child < 0) throw Error(errno_message("cannot start " + command.front(), errno));
  if (child == 0) {
    close(pipe_fds[0]);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // tprof blocks its stop signals; the command must not
    for (const std::string& variable : environment) putenv(const_cast<char*>(variable.c_str()));
    std::vector<char*> argv;
    for (const std::string& argument : command) argv.push_back(const_cast<char*>(argument.c_str()));
    argv.push_back(nullptr);
    execvp(argv[0], argv.data());
    const int exec_error = errno;
    (void)!write(pipe_fds[1], &exec_error, sizeof(exec_error));
    _exit(127);
  }
  close(pipe_fds[1]);
  int exec_error = 0;
  const ssize_t got = read(pipe_fds[0], &exec_error, sizeof(exec_error));
  close(pipe_fds[0]);
  if (got == sizeof(exec_error)) {
    waitpid(child, nullptr, 0);
    throw Error(errno_message("cannot run " + command.front(), exec_error));
  }
  return child;
}

// The exited child stays a zombie (its pidfd readable) until wait_for_command reaps it.
bool wait_for_torch(pid_t pid) {
  const TargetProcess target(pid);
  while (!target.find_mapped_library("libtorch_cpu.so")) {
    if (exits_within_poll(target)) return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + kLoaderGrace;
  while (!target.find_mapped_library("libtorch_python.so") && std::chrono::steady_clock::now() < deadline) {
    if (exits_within_poll(target)) return false;
  }
  return true;
}

int wait_for_command(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return 1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace tprof
