// Checks, before touching BPF, that this process holds the capabilities tprof needs, so the
// user learns which one is missing instead of seeing EPERM from deep inside libbpf.
#pragma once

#include <sys/types.h>

#include <string>

namespace tprof {

// Throws tprof::Error naming the missing capability: CAP_BPF and CAP_PERFMON (or
// CAP_SYS_ADMIN) to load programs and attach uprobes; CAP_SYS_PTRACE when the target belongs
// to another user (to open its files through /proc/PID/root).
void require_tracing_privileges(uid_t target_uid);

// What require_tracing_privileges would say is missing; "" when nothing is.
std::string missing_tracing_privilege(uid_t target_uid);

}  // namespace tprof
