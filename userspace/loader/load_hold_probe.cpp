#include "userspace/loader/load_hold_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>

#include "load_hold.skel.h"
#include "userspace/cli/error.h"
#include "userspace/loader/libbpf_messages.h"

namespace tprof {

void LoadHoldProbe::SkeletonDeleter::operator()(load_hold* skeleton) const { load_hold__destroy(skeleton); }

LoadHoldProbe::LoadHoldProbe() {
  route_libbpf_messages();
  skeleton_.reset(load_hold__open_and_load());
  if (!skeleton_)
    throw Error(with_libbpf_messages(errno_message("cannot load the library-load hold BPF object", errno)));
}

LoadHoldProbe::~LoadHoldProbe() = default;

void LoadHoldProbe::link(pid_t pid, const std::string& binary_path, const char* function) {
  LIBBPF_OPTS(bpf_uprobe_multi_opts, opts);
  bpf_link* link =
      bpf_program__attach_uprobe_multi(skeleton_->progs.hold_here, pid, binary_path.c_str(), function, &opts);
  if (!link)
    throw Error(with_libbpf_messages(errno_message(std::string("cannot probe ") + function + " in " + binary_path, errno)));
  links_[pid].emplace_back(link);
}

bool LoadHoldProbe::claim(pid_t tid, int signal) {
  const auto key = static_cast<__u32>(tid);
  __u32 requested = 0;
  const int map = bpf_map__fd(skeleton_->maps.hold_requests);
  if (bpf_map_lookup_elem(map, &key, &requested) != 0) return false;
  bpf_map_delete_elem(map, &key);
  return requested == static_cast<__u32>(signal);
}

uint64_t LoadHoldProbe::refused() const {
  const __u32 zero = 0;
  __u64 count = 0;
  bpf_map_lookup_elem(bpf_map__fd(skeleton_->maps.holds_refused), &zero, &count);
  return count;
}

}  // namespace tprof
