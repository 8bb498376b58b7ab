#include "userspace/session/process_holder.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <exception>
#include <future>
#include <mutex>

#include "userspace/cli/error.h"
#include "userspace/assemble/wall_clock.h"
#include "userspace/loader/unique_fd.h"
#include "userspace/session/tracees.h"

namespace tprof {
namespace {

UniqueFd new_eventfd() {
  UniqueFd fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!fd) throw Error(errno_message("eventfd", errno));
  return fd;
}

void notify(const UniqueFd& eventfd) {
  const uint64_t one = 1;
  (void)!::write(eventfd.get(), &one, sizeof(one));
}

void drain(int fd) {
  uint64_t count = 0;
  (void)!::read(fd, &count, sizeof(count));
}

// SIGCHLD, blocked in every thread of tprof (the service thread inherits the mask), is read
// from this descriptor: each tracee stop or exit sends one.
UniqueFd child_signal_fd() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGCHLD);
  if (::pthread_sigmask(SIG_BLOCK, &signals, nullptr) != 0) throw Error("cannot block SIGCHLD");
  UniqueFd fd(::signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd) throw Error(errno_message("signalfd", errno));
  return fd;
}

}  // namespace

// What the service thread and the session's thread share: at most one held process waiting for
// its answer, the command's end, and the flags that end holding and the thread.
struct ProcessHolder::Shared {
  enum class Kind { kTorchLoaded, kImageReplaced, kDeviceLibraryLoaded, kLibraryLoaded };
  struct Request {
    Kind kind;
    pid_t pid;
    uint64_t held_ns = monotonic_now_ns();
  };

  // The service thread: waits until the session has answered `request`, unless holding ends;
  // whether the session wants the process's later loads held too (kLibraryLoaded).
  bool ask(Request request) {
    std::unique_lock lock(mutex);
    if (!holding) return false;
    pending = request;
    answered = false;
    notify(session_wake);
    answer_given.wait(lock, [this] { return answered || !holding; });
    pending.reset();
    if (request.kind == Kind::kLibraryLoaded && answered && hold_later_loads) {
      ++load_holds.count;
      load_holds.ns += monotonic_now_ns() - request.held_ns;
    }
    return answered && hold_later_loads;
  }

  // What the traced processes ask of the session, through this.
  Tracees::Requests requests() {
    return {.torch_loaded = [this](pid_t pid) { ask({Kind::kTorchLoaded, pid}); },
            .image_replaced = [this](pid_t pid) { ask({Kind::kImageReplaced, pid}); },
            .device_library_loaded = [this](pid_t pid) { ask({Kind::kDeviceLibraryLoaded, pid}); },
            .library_loaded = [this](pid_t pid) { return ask({Kind::kLibraryLoaded, pid}); },
            .command_ended =
                [this](int status, const std::string& how) {
                  std::lock_guard lock(mutex);
                  command_status = status;
                  command_end = how;
                  notify(session_wake);
                }};
  }

  // The service thread's loop: answers every stop as it comes, until the holder goes.
  void serve(Tracees& tracees) {
    bool tracees_holding = true;
    for (;;) {
      pollfd ready[2] = {{.fd = child_signals.get(), .events = POLLIN, .revents = 0},
                         {.fd = service_wake.get(), .events = POLLIN, .revents = 0}};
      if (::poll(ready, 2, -1) < 0 && errno != EINTR) return;
      signalfd_siginfo signal;
      while (::read(child_signals.get(), &signal, sizeof(signal)) == sizeof(signal)) {
      }
      drain(service_wake.get());
      tracees.handle_events();
      std::lock_guard lock(mutex);
      if (tracees_holding && !holding) {
        tracees.stop_holding();
        tracees_holding = false;
      }
      holds_refused = tracees.holds_refused();
      if (quit) return;
    }
  }

  std::mutex mutex;
  std::condition_variable answer_given;
  std::optional<Request> pending;
  bool answered = false;
  bool holding = true;
  bool quit = false;
  std::optional<int> command_status;
  std::string command_end;
  std::atomic<uint64_t> holds_refused = 0;
  LoadHolds load_holds;
  bool hold_later_loads = false;  // the answer to the last kLibraryLoaded request
  UniqueFd session_wake = new_eventfd();  // the session's thread: a request, or the command ended
  UniqueFd service_wake = new_eventfd();  // the service thread: holding ended, or quit
  UniqueFd child_signals = child_signal_fd();
};

ProcessHolder::ProcessHolder(bool follow, const std::vector<std::string>& command,
                             const std::vector<std::string>& environment)
    : shared_(std::make_shared<Shared>()) {
  start(follow, [&command, &environment](Tracees& tracees) { return tracees.launch(command, environment); });
}

ProcessHolder::ProcessHolder(const std::vector<pid_t>& running, const std::set<pid_t>& attached)
    : shared_(std::make_shared<Shared>()) {
  start(true, [&running, &attached](Tracees& tracees) {
    for (const pid_t pid : running) tracees.follow_running(pid, attached.contains(pid));
    return pid_t{0};
  });
}

void ProcessHolder::start(bool follow, std::function<pid_t(Tracees&)> begin) {
  std::promise<pid_t> started;
  std::future<pid_t> begun = started.get_future();
  service_ = std::thread([shared = shared_, follow, &begin, &started] {
    std::optional<Tracees> tracees;
    try {
      tracees.emplace(follow, shared->requests());
      started.set_value(begin(*tracees));
    } catch (...) {
      started.set_exception(std::current_exception());
      return;
    }
    try {
      shared->serve(*tracees);
    } catch (...) {
      // Nothing is left to answer the tracees: the kernel detaches them as this thread ends.
    }
  });
  try {
    command_ = begun.get();
  } catch (...) {
    service_.join();
    throw;
  }
}

// The thread ends; processes still traced (a --follow child outliving the command) are
// detached by the kernel when tprof exits, moments later.
ProcessHolder::~ProcessHolder() {
  if (!service_.joinable()) return;
  {
    std::lock_guard lock(shared_->mutex);
    shared_->holding = false;
    shared_->quit = true;
  }
  shared_->answer_given.notify_all();
  notify(shared_->service_wake);
  service_.join();
}

int ProcessHolder::events_fd() const { return shared_->session_wake.get(); }

void ProcessHolder::answer(const Callbacks& callbacks) {
  drain(shared_->session_wake.get());
  std::optional<Shared::Request> request;
  {
    std::lock_guard lock(shared_->mutex);
    if (!shared_->answered) request = shared_->pending;
  }
  if (!request) return;
  std::exception_ptr failure;
  bool hold_later_loads = false;
  try {
    if (request->kind == Shared::Kind::kTorchLoaded) {
      if (callbacks.torch_loaded) callbacks.torch_loaded(request->pid, request->held_ns);
    } else if (request->kind == Shared::Kind::kLibraryLoaded) {
      hold_later_loads = callbacks.library_loaded && callbacks.library_loaded(request->pid);
    } else {
      const auto& callback =
          request->kind == Shared::Kind::kImageReplaced ? callbacks.image_replaced : callbacks.device_library_loaded;
      if (callback) callback(request->pid);
    }
  } catch (...) {
    failure = std::current_exception();
  }
  {
    std::lock_guard lock(shared_->mutex);
    shared_->answered = true;
    shared_->hold_later_loads = hold_later_loads;
  }
  shared_->answer_given.notify_all();
  if (failure) std::rethrow_exception(failure);
}

void ProcessHolder::stop_holding() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->holding = false;
  }
  shared_->answer_given.notify_all();
  notify(shared_->service_wake);
}

std::optional<int> ProcessHolder::command_status() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->command_status;
}

std::string ProcessHolder::command_end() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->command_end;
}

void ProcessHolder::forward_signal(int signal) const {
  if (command_ > 0 && !command_status()) ::kill(command_, signal);
}

uint64_t ProcessHolder::holds_refused() const { return shared_->holds_refused; }

ProcessHolder::LoadHolds ProcessHolder::load_holds() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->load_holds;
}

}  // namespace tprof
