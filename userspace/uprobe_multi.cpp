#include "userspace/uprobe_multi.h"

#include <bpf/libbpf.h>
#include <sys/utsname.h>

#include <cerrno>
#include <cstdio>

#include "userspace/error.h"

namespace tprof {

void BpfLinkDeleter::operator()(bpf_link* link) const { bpf_link__destroy(link); }

bool kernel_release_has_uprobe_multi(const char* release) {
  int major = 0, minor = 0;
  if (std::sscanf(release, "%d.%d", &major, &minor) != 2) return false;
  return major > 6 || (major == 6 && minor >= 6);
}

void require_uprobe_multi_kernel() {
  utsname uts{};
  ::uname(&uts);
  if (!kernel_release_has_uprobe_multi(uts.release))
    throw Error(std::string("kernel ") + uts.release + " has no uprobe_multi links (Linux 6.6 or newer is required)");
}

BpfLink attach_uprobe_multi(const bpf_program* program, pid_t pid, const UprobeSites& sites, bool on_return) {
  LIBBPF_OPTS(bpf_uprobe_multi_opts, opts);
  opts.offsets = sites.offsets.data();
  static_assert(sizeof(uint64_t) == sizeof(__u64));
  opts.cookies = reinterpret_cast<const __u64*>(sites.cookies.data());
  opts.cnt = sites.offsets.size();
  opts.retprobe = on_return;
  bpf_link* link = bpf_program__attach_uprobe_multi(program, pid, sites.binary_path.c_str(), nullptr, &opts);
  if (!link) {
    const int err = errno;
    if (err == EOPNOTSUPP || err == ENOSYS)
      throw Error("this kernel does not support uprobe_multi links (CONFIG_UPROBES and Linux 6.6+ are required)");
    throw Error(errno_message(std::string("cannot attach ") + (on_return ? "return" : "entry") + " uprobes to " +
                                  std::to_string(sites.offsets.size()) + " sites in " + sites.binary_path,
                              err));
  }
  return BpfLink(link);
}

}  // namespace tprof
