#include "userspace/loader/load_hold_probe.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cerrno>
#include <string>

#include "load_hold.h"
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

void LoadHoldProbe::link(pid_t pid, Site site, const std::string& binary_path, const char* function) {
  LIBBPF_OPTS(bpf_uprobe_multi_opts, opts);
  bpf_program* program = site == Site::kLoader ? skeleton_->progs.hold_at_loader : skeleton_->progs.hold_at_injection;
  bpf_link* link = bpf_program__attach_uprobe_multi(program, pid, binary_path.c_str(), function, &opts);
  if (!link)
    throw Error(with_libbpf_messages(errno_message(std::string("cannot probe ") + function + " in " + binary_path, errno)));
  links_.insert_or_assign({pid, site}, BpfLink(link));
}

void LoadHoldProbe::hold_only_once_mapped(pid_t pid, uint64_t r_debug_address) {
  const auto key = static_cast<__u32>(pid);
  const __u64 state_address = r_debug_address + LOAD_HOLD_R_STATE_OFFSET;
  (void)bpf_map_update_elem(bpf_map__fd(skeleton_->maps.loader_states), &key, &state_address, BPF_ANY);
}

void LoadHoldProbe::unlink(pid_t pid) {
  unlink(pid, Site::kLoader);
  unlink(pid, Site::kInjection);
}

void LoadHoldProbe::unlink(pid_t pid, Site site) {
  links_.erase({pid, site});
  if (site != Site::kLoader) return;
  const auto key = static_cast<__u32>(pid);
  bpf_map_delete_elem(bpf_map__fd(skeleton_->maps.loader_states), &key);
}

std::optional<LoadHoldProbe::Site> LoadHoldProbe::claim(pid_t tid, int signal) {
  const auto key = static_cast<__u32>(tid);
  __u32 request = 0;
  const int map = bpf_map__fd(skeleton_->maps.hold_requests);
  if (bpf_map_lookup_elem(map, &key, &request) != 0) return std::nullopt;
  bpf_map_delete_elem(map, &key);
  if ((request & ((1u << LOAD_HOLD_SITE_SHIFT) - 1)) != static_cast<__u32>(signal)) return std::nullopt;
  return (request >> LOAD_HOLD_SITE_SHIFT) == LOAD_HOLD_AT_INJECTION ? Site::kInjection : Site::kLoader;
}

uint64_t LoadHoldProbe::refused() const {
  const __u32 zero = 0;
  __u64 count = 0;
  bpf_map_lookup_elem(bpf_map__fd(skeleton_->maps.holds_refused), &zero, &count);
  return count;
}

}  // namespace tprof
