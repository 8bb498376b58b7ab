// SIGINT/SIGTERM/SIGHUP, blocked and delivered through a signalfd, so that Ctrl-C ends
// recording through an event loop instead of killing tprof with its trace unwritten.
#pragma once

#include "userspace/loader/unique_fd.h"

namespace tprof {

// Blocks the stop signals in the calling thread (call before starting any thread) and
// returns a non-blocking signalfd that becomes readable when one arrives.
UniqueFd block_stop_signals();

}  // namespace tprof
