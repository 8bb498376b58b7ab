#include "userspace/loader/uprobe_multi.h"

#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "userspace/cli/error.h"
#include "userspace/loader/libbpf_messages.h"
#include "userspace/loader/unique_fd.h"

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

namespace {

constexpr unsigned char kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};

// Attaches `program` at `offsets`, which are already where the probes go.
BpfLink attach_at(const bpf_program* program, pid_t pid, const UprobeSites& sites,
                  const std::vector<unsigned long>& offsets) {
  LIBBPF_OPTS(bpf_uprobe_multi_opts, opts);
  opts.offsets = offsets.data();
  static_assert(sizeof(uint64_t) == sizeof(__u64));
  opts.cookies = reinterpret_cast<const __u64*>(sites.cookies.data());
  opts.cnt = sites.offsets.size();
  bpf_link* link = bpf_program__attach_uprobe_multi(program, pid, sites.binary_path.c_str(), nullptr, &opts);
  if (!link) {
    const int err = errno;
    if (err == EOPNOTSUPP || err == ENOSYS)
      throw Error("this kernel does not support uprobe_multi links (CONFIG_UPROBES and Linux 6.6+ are required)");
    throw Error(with_libbpf_messages(errno_message(
        "cannot attach uprobes to " + std::to_string(sites.offsets.size()) + " sites in " + sites.binary_path, err)));
  }
  return BpfLink(link);
}

}  // namespace

std::vector<unsigned long> past_leading_endbr64(const std::string& binary_path,
                                                const std::vector<unsigned long>& offsets) {
  std::vector<unsigned long> adjusted = offsets;
  const UniqueFd file(::open(binary_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file) return adjusted;  // attaching will report the file
  for (unsigned long& offset : adjusted) {
    unsigned char head[sizeof(kEndbr64)];
    if (::pread(file.get(), head, sizeof(head), static_cast<off_t>(offset)) == sizeof(head) &&
        std::memcmp(head, kEndbr64, sizeof(head)) == 0)
      offset += sizeof(kEndbr64);
  }
  return adjusted;
}

BpfLink attach_uprobe_multi(const bpf_program* program, pid_t pid, const UprobeSites& sites) {
  return attach_at(program, pid, sites, past_leading_endbr64(sites.binary_path, sites.offsets));
}

}  // namespace tprof
