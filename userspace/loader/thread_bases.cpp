#include "userspace/loader/thread_bases.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <cerrno>

#include "thread_base.h"
#include "thread_bases.skel.h"
#include "userspace/cli/error.h"
#include "userspace/loader/libbpf_messages.h"
#include "userspace/loader/uprobe_multi.h"
#include "userspace/loader/unique_fd.h"

namespace tprof {

void ThreadBases::SkeletonDeleter::operator()(thread_bases* skeleton) const { thread_bases__destroy(skeleton); }

ThreadBases::ThreadBases() {
  route_libbpf_messages();
  skeleton_.reset(thread_bases__open_and_load());
  if (!skeleton_)
    throw Error(with_libbpf_messages(errno_message("cannot load the thread-base BPF iterator", errno)));
}

ThreadBases::~ThreadBases() = default;

std::unordered_map<uint32_t, uint32_t> ThreadBases::read(pid_t pid) const {
  std::unordered_map<uint32_t, uint32_t> threads;
  union bpf_iter_link_info link_info = {};
  link_info.task.pid = static_cast<__u32>(pid);  // every thread of that process
  LIBBPF_OPTS(bpf_iter_attach_opts, options, .link_info = &link_info, .link_info_len = sizeof(link_info));
  const BpfLink link(bpf_program__attach_iter(skeleton_->progs.thread_bases, &options));
  if (!link) return threads;
  const UniqueFd iterator(bpf_iter_create(bpf_link__fd(link.get())));
  if (iterator.get() < 0) return threads;
  thread_base entry{};
  while (::read(iterator.get(), &entry, sizeof(entry)) == static_cast<ssize_t>(sizeof(entry)))
    threads[entry.fs_base_low] = entry.tid;
  return threads;
}

uint32_t CuptiThreadNames::os_thread(uint32_t cupti_thread) {
  if (const auto known = threads_.find(cupti_thread); known != threads_.end()) return known->second;
  if (unavailable_ || !looked_for_.insert(cupti_thread).second) return 0;
  try {
    if (!bases_) bases_ = std::make_unique<ThreadBases>();
  } catch (const Error&) {
    unavailable_ = true;
    return 0;
  }
  for (const auto& [base, tid] : bases_->read(pid_)) threads_.insert_or_assign(base, tid);
  const auto found = threads_.find(cupti_thread);
  return found != threads_.end() ? found->second : 0;
}

}  // namespace tprof
