#include "userspace/session/stop_signals.h"

#include <signal.h>
#include <sys/signalfd.h>

#include <cerrno>

#include "userspace/cli/error.h"

namespace tprof {

UniqueFd block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  if (::sigprocmask(SIG_BLOCK, &signals, nullptr) != 0) throw Error(errno_message("sigprocmask", errno));
  UniqueFd fd(::signalfd(-1, &signals, SFD_CLOEXEC | SFD_NONBLOCK));
  if (!fd) throw Error(errno_message("signalfd", errno));
  return fd;
}

}  // namespace tprof
