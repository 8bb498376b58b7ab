// libbpf's own messages (a verifier log, "failed to attach multi-uprobe: ...") go into the error
// tprof reports, not straight to stderr: an error is one line, and a failure tprof explains
// otherwise (a target that exited mid-attach) must not leave libbpf's words before it.
#pragma once

#include <string>

namespace tprof {

// Routes libbpf's warnings into a small buffer from now on (its debug output is dropped). Once
// per process; later calls do nothing.
void route_libbpf_messages();

// The warnings libbpf gave since the last call, joined by "; " ("" if none), and forgets them.
std::string take_libbpf_messages();

// `message`, then what libbpf said meanwhile: "cannot attach ...: ENOENT (libbpf: failed to ...)".
std::string with_libbpf_messages(std::string message);

}  // namespace tprof
