#include "userspace/session/tracees.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string_view>

#include "load_hold.h"
#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "userspace/cli/error.h"
#include "userspace/session/target_process.h"

namespace tprof {
namespace {

constexpr const char* kTorchLibraryPrefix = "libtorch_cpu.so";
constexpr const char* kDeviceLibraryPrefix = "libtprof_cupti.so";

// SEIZE, not ATTACH: nothing stops, and group-stops (Ctrl-Z) are told apart from ptrace's own.
unsigned long trace_options(bool follow) {
  unsigned long options = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;
  if (follow) options |= PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK;
  return options;
}

void resume(pid_t tid, int signal) { ::ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(signal)); }

// A number field of /proc/TID/status ("Tgid:"); 0 once the thread is gone.
pid_t status_field(pid_t tid, const std::string& field) {
  std::ifstream status("/proc/" + std::to_string(tid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(field, 0) == 0) return static_cast<pid_t>(std::stol(line.substr(field.size())));
  return 0;
}

// The process a thread belongs to; 0 once it is gone.
pid_t process_of(pid_t tid) { return status_field(tid, "Tgid:"); }

// The pid tracing a thread; 0: none, or gone.
pid_t tracer_of(pid_t tid) { return status_field(tid, "TracerPid:"); }

std::vector<pid_t> threads_of(pid_t pid) {
  std::vector<pid_t> threads;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error))
    threads.push_back(static_cast<pid_t>(std::stol(entry.path().filename().string())));
  return threads;
}

// Cheaper than TargetProcess: a hold happens at every dlopen, and most are not torch's. Read in
// one piece: a process with torch maps thousands of lines.
bool maps_library(pid_t pid, const char* file_name_prefix) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::ostringstream text;
  text << maps.rdbuf();
  return text.view().find(file_name_prefix) != std::string_view::npos;
}

bool maps_torch(pid_t pid) { return maps_library(pid, kTorchLibraryPrefix); }

// The CUDA injection library a process was started with, which CUDA has not loaded yet, as
// opened from here; none if there is none.
std::optional<std::string> awaited_device_library(pid_t pid) {
  try {
    const auto library = TargetProcess(pid).environment_variable("CUDA_INJECTION64_PATH");
    if (!library || library->empty() || maps_library(pid, kDeviceLibraryPrefix)) return std::nullopt;
    return "/proc/" + std::to_string(pid) + "/root" + (library->front() == '/' ? "" : "/") + *library;
  } catch (const Error&) {
    return std::nullopt;  // gone
  }
}

// Fault injection for the e2e tests that a target held by a tprof that dies runs on unharmed:
// TPROF_TEST_DIE_WHILE_HOLDING=torch-load dies holding it at its load of torch, =later-load at
// its first dlopen after that.
void die_if_tested_holding_at(std::string_view hold) {
  const char* tested = std::getenv("TPROF_TEST_DIE_WHILE_HOLDING");
  if (tested && hold == tested) ::raise(SIGKILL);
}

// Where the loader's r_debug (the debugger interface's state) lies in the process; none where
// the loader does not export it. Without it, a dlopen is held at both of its notifications.
std::optional<uint64_t> r_debug_address(const MappedLibrary& loader) {
  try {
    const symbolizer::ElfFile elf(loader.host_path);
    const symbolizer::DefinedSymbols symbols(elf);
    if (const symbolizer::DefinedSymbol* r_debug = symbols.find("_r_debug")) return loader.load_address + r_debug->address;
  } catch (const std::exception&) {
    // unreadable: held at both
  }
  return std::nullopt;
}

bool is_hold_signal(int signal) { return signal == LOAD_HOLD_SIGNAL || signal == LOAD_HOLD_FALLBACK_SIGNAL; }

bool is_stop_signal(int signal) {
  return signal == SIGSTOP || signal == SIGTSTP || signal == SIGTTIN || signal == SIGTTOU;
}

std::string describe_end(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigabbrev_np(WTERMSIG(status));
    return std::string("was killed by SIG") + (name ? name : std::to_string(WTERMSIG(status)).c_str()) +
           (WCOREDUMP(status) ? " (core dumped)" : "");
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

Tracees::Tracees(bool follow, Requests requests) : follow_(follow), requests_(std::move(requests)) {}

// Our environment with `variables` ("NAME=value") set, replacing ours of the same names.
std::vector<char*> with_variables(const std::vector<std::string>& variables) {
  std::vector<char*> envp;
  for (char** variable = environ; *variable; ++variable) {
    const std::string_view ours(*variable);
    const bool replaced = std::any_of(variables.begin(), variables.end(), [&](const std::string& set) {
      return ours.substr(0, ours.find('=') + 1) == std::string_view(set).substr(0, set.find('=') + 1);
    });
    if (!replaced) envp.push_back(*variable);
  }
  for (const std::string& variable : variables) envp.push_back(const_cast<char*>(variable.c_str()));
  envp.push_back(nullptr);
  return envp;
}

// The child's part of launch(): waits until it is traced, then runs the command. Only calls
// that are safe after a fork of a threaded process: everything it needs was built before.
[[noreturn]] void run_command_when_traced(int go_fd, int exec_error_fd, char* const argv[], char* const envp[]) {
  char go = 0;
  if (::read(go_fd, &go, 1) != 1) ::_exit(127);  // tprof died before tracing it
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);  // tprof blocks its stop signals and SIGCHLD; the command must not
  ::execvpe(argv[0], argv, envp);
  const int exec_error = errno;
  (void)!::write(exec_error_fd, &exec_error, sizeof(exec_error));
  ::_exit(127);
}

pid_t Tracees::launch(const std::vector<std::string>& command, const std::vector<std::string>& environment) {
  std::vector<char*> argv;
  for (const std::string& argument : command) argv.push_back(const_cast<char*>(argument.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp = with_variables(environment);
  // exec_error: exec's errno back to us, so that "no such command" is tprof's error. go: the
  // child waits on it until it is traced, so that its exec is seen.
  int exec_error_pipe[2], go_pipe[2];
  if (pipe2(exec_error_pipe, O_CLOEXEC) != 0 || pipe2(go_pipe, O_CLOEXEC) != 0)
    throw Error(errno_message("cannot start " + command.front(), errno));
  const pid_t child = fork();
  if (child < 0) throw Error(errno_message("cannot start " + command.front(), errno));
  if (child == 0) run_command_when_traced(go_pipe[0], exec_error_pipe[1], argv.data(), envp.data());
  close(exec_error_pipe[1]);
  close(go_pipe[0]);
  command_ = child;
  known_.insert(child);
  const int seized = ::ptrace(PTRACE_SEIZE, child, nullptr, reinterpret_cast<void*>(trace_options(follow_)));
  const int seize_error = errno;
  (void)!write(go_pipe[1], "g", 1);
  close(go_pipe[1]);
  int exec_error = 0;
  const ssize_t got = read(exec_error_pipe[0], &exec_error, sizeof(exec_error));
  close(exec_error_pipe[0]);
  if (seized == 0 && got != sizeof(exec_error)) return child;
  if (seized == 0) handle_events();  // its exit, if traced
  waitpid(child, nullptr, 0);
  if (seized != 0)
    throw Error(errno_message("cannot trace " + command.front() + " to hold it at torch's load (ptrace)", seize_error));
  throw Error(errno_message("cannot run " + command.front(), exec_error));
}

void Tracees::follow_running(pid_t pid, bool attached) {
  std::set<pid_t> seized;
  // A thread a seized one starts is traced with it; one an unseized thread starts meanwhile is
  // in the next listing.
  for (bool more = true; more;) {
    more = false;
    for (const pid_t tid : threads_of(pid)) {
      if (seized.contains(tid)) continue;
      if (::ptrace(PTRACE_SEIZE, tid, nullptr, reinterpret_cast<void*>(trace_options(follow_))) != 0 &&
          errno != ESRCH && tracer_of(tid) != ::getpid())
        throw Error(errno_message("cannot trace process " + std::to_string(pid) +
                                      " to hold the processes it starts (is a debugger tracing it?)",
                                  errno));
      seized.insert(tid);
      more = true;
    }
  }
  known_.insert(pid);
  if (attached) {
    attached_.insert(pid);
  } else {
    probe_loader_of(pid);
  }
}

void Tracees::handle_events() {
  for (;;) {
    int status = 0;
    const pid_t tid = ::waitpid(-1, &status, __WALL | WNOHANG);
    if (tid <= 0) return;
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
      on_exit(tid);
      if (tid == command_)
        requests_.command_ended(WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status),
                                describe_end(status));
    } else if (WIFSTOPPED(status)) {
      on_stop(tid, status);
    }
  }
}

void Tracees::stop_holding() {
  holding_ = false;
  for (const pid_t pid : known_) loader_probe_.unlink(pid);
}

void Tracees::on_exit(pid_t tid) {
  if (!known_.contains(tid)) return;  // a thread
  known_.erase(tid);
  attached_.erase(tid);
  awaiting_device_library_.erase(tid);
  births_reported_.erase(tid);
  loader_probe_.unlink(tid);
}

void Tracees::on_stop(pid_t tid, int status) {
  const int event = status >> 16;
  const int signal = WSTOPSIG(status);
  switch (event) {
    case PTRACE_EVENT_CLONE:
      resume(tid, 0);  // the new thread reports a stop of its own
      return;
    case PTRACE_EVENT_FORK:
    case PTRACE_EVENT_VFORK:
      on_birth(tid, event);
      return;
    case PTRACE_EVENT_EXEC:
      on_exec(process_of(tid));
      resume(tid, 0);
      return;
    case PTRACE_EVENT_STOP:
      if (is_stop_signal(signal)) {
        // A group-stop (Ctrl-Z, SIGSTOP): it stays stopped until SIGCONT, as untraced.
        ::ptrace(PTRACE_LISTEN, tid, nullptr, nullptr);
        return;
      }
      // A new thread or process, stopped before its first instruction.
      if (tid == process_of(tid) && !known_.contains(tid)) {
        const auto reported = births_reported_.find(tid);
        if (reported == births_reported_.end()) {
          unreported_children_.insert(tid);  // resumed once its parent tells how it was born
          return;
        }
        const int birth_event = reported->second;
        births_reported_.erase(reported);
        on_new_process(tid, birth_event);
      }
      resume(tid, 0);
      return;
    default:
      if (is_hold_signal(signal)) {
        if (const auto site = loader_probe_.claim(tid, signal)) {
          hold(tid, *site);
          return;
        }
      }
      resume(tid, signal);  // the target's own signal, delivered as it would have been
  }
}

// A traced process forked (the child is traced too, and stops at its start).
void Tracees::on_birth(pid_t parent, int event) {
  unsigned long message = 0;
  ::ptrace(PTRACE_GETEVENTMSG, parent, nullptr, &message);
  const auto child = static_cast<pid_t>(message);
  if (unreported_children_.erase(child) > 0) {
    on_new_process(child, event);
    resume(child, 0);
  } else {
    births_reported_[child] = event;
  }
  resume(parent, 0);
}

// A forked child shares its parent's mappings, an attached libtorch included, and it is
// recorded from here; or it has no torch yet, and is held when it loads one. A vforked child
// borrows its parent's memory until it execs (spawn, subprocess): it runs no op, and its exec
// is where it is probed.
void Tracees::on_new_process(pid_t pid, int birth_event) {
  known_.insert(pid);
  if (birth_event == PTRACE_EVENT_VFORK) return;
  if (holding_ && maps_torch(pid)) {
    attach_held(pid, pid);
    return;
  }
  probe_loader_of(pid);
}

// A new image, whose loader is mapped and has run nothing yet. An attached process's probes
// would follow it into the new image, whose libtorch may sit at the same offsets.
void Tracees::on_exec(pid_t pid) {
  if (pid == 0) return;
  awaiting_device_library_.erase(pid);
  loader_probe_.unlink(pid);  // the old image's
  if (attached_.erase(pid) > 0) requests_.image_replaced(pid);
  probe_loader_of(pid);
}

void Tracees::probe_loader_of(pid_t pid) {
  if (!holding_) return;
  try {
    const TargetProcess process(pid);
    // Every glibc x86-64 loader is ld-linux-x86-64.so.2; a static program has none and is not held.
    if (const auto loader = process.find_mapped_library("ld-linux")) {
      loader_probe_.link(pid, LoadHoldProbe::Site::kLoader, loader->host_path, "_dl_debug_state");
      if (const auto r_debug = r_debug_address(*loader)) loader_probe_.hold_only_once_mapped(pid, *r_debug);
    }
  } catch (const Error&) {
    // It exited meanwhile, or its loader could not be probed: it runs unheld.
  }
}

void Tracees::hold(pid_t tid, LoadHoldProbe::Site site) {
  const pid_t pid = process_of(tid);
  if (holding_ && pid != 0) {
    if (site == LoadHoldProbe::Site::kInjection) {
      if (awaiting_device_library_.erase(pid) > 0) {
        loader_probe_.unlink(pid, LoadHoldProbe::Site::kInjection);
        requests_.device_library_loaded(pid);
      }
    } else if (!attached_.contains(pid)) {
      if (maps_torch(pid)) {
        attach_held(pid, tid);
        return;
      }
    } else {
      die_if_tested_holding_at("later-load");
      if (!requests_.library_loaded(pid)) loader_probe_.unlink(pid, LoadHoldProbe::Site::kLoader);
    }
  }
  resume(tid, 0);
}

void Tracees::attach_held(pid_t pid, pid_t tid) {
  die_if_tested_holding_at("torch-load");
  attached_.insert(pid);
  requests_.torch_loaded(pid);
  // Its later dlopens are held too, so that code torch compiles while it runs (inductor's
  // kernels) is probed before its first call; so is CUDA's call into the injection library it
  // loads at cuInit.
  if (const auto library = awaited_device_library(pid)) {
    try {
      loader_probe_.link(pid, LoadHoldProbe::Site::kInjection, *library, "InitializeInjection");
      awaiting_device_library_.insert(pid);
    } catch (const Error&) {
      // Not a library tprof can probe: GPU timing stays unavailable, as the trace says.
    }
  }
  resume(tid, 0);
}

}  // namespace tprof
