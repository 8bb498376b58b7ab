#include "userspace/session/privileges.h"

#include <sys/capability.h>
#include <unistd.h>

#include <memory>

#include "userspace/cli/error.h"

namespace tprof {
namespace {

struct CapDeleter {
  void operator()(_cap_struct* caps) const { cap_free(caps); }
};

bool has_effective(cap_t caps, cap_value_t capability) {
  cap_flag_value_t value = CAP_CLEAR;
  return cap_get_flag(caps, capability, CAP_EFFECTIVE, &value) == 0 && value == CAP_SET;
}

}  // namespace

std::string missing_tracing_privilege(uid_t target_uid) {
  std::unique_ptr<_cap_struct, CapDeleter> caps(cap_get_proc());
  if (!caps) return errno_message("cannot read this process's capabilities", errno);
  const bool sys_admin = has_effective(caps.get(), CAP_SYS_ADMIN);
  if (!sys_admin && !has_effective(caps.get(), CAP_BPF))
    return "missing capability CAP_BPF (or CAP_SYS_ADMIN) to load BPF programs; run as root (sudo tprof ...)";
  if (!sys_admin && !has_effective(caps.get(), CAP_PERFMON))
    return "missing capability CAP_PERFMON (or CAP_SYS_ADMIN) to attach uprobes; run as root (sudo tprof ...)";
  if (target_uid != ::geteuid() && !has_effective(caps.get(), CAP_SYS_PTRACE))
    return "missing capability CAP_SYS_PTRACE to read a process of another user; run as root (sudo tprof ...)";
  return "";
}

void require_tracing_privileges(uid_t target_uid) {
  if (const std::string missing = missing_tracing_privilege(target_uid); !missing.empty()) throw Error(missing);
}

}  // namespace tprof
