#include "userspace/op_tracer.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <vector>

#include "op_record.h"
#include "op_tracer.skel.h"
#include "userspace/error.h"

namespace tprof {

void OpTracer::SkeletonDeleter::operator()(op_tracer* skeleton) const { op_tracer__destroy(skeleton); }

OpTracer::OpTracer(size_t ring_buffer_bytes) {
  skeleton_.reset(op_tracer__open());
  if (!skeleton_) throw Error(errno_message("cannot open the op tracer BPF object", errno));
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t ring_bytes = std::bit_ceil(std::max(ring_buffer_bytes, page));
  if (bpf_map__set_max_entries(skeleton_->maps.op_records, static_cast<__u32>(ring_bytes)) != 0)
    throw Error("cannot size the ring buffer to " + std::to_string(ring_bytes) + " bytes");
  if (op_tracer__load(skeleton_.get()) != 0) {
    const int err = errno;
    if (err == EPERM) throw Error("the kernel refused to load BPF programs (EPERM); run as root");
    throw Error(errno_message("cannot load the op tracer BPF programs", err));
  }
}

OpTracer::~OpTracer() = default;

void OpTracer::attach(pid_t pid, const UprobeSites& sites) {
  // Returns first: a return probe only catches calls entered after it exists, so this order
  // guarantees that every recorded entry can also have its return recorded.
  return_link_ = attach_uprobe_multi(skeleton_->progs.op_exit, pid, sites, /*on_return=*/true);
  entry_link_ = attach_uprobe_multi(skeleton_->progs.op_enter, pid, sites, /*on_return=*/false);
}

void OpTracer::detach() {
  entry_link_.reset();
  return_link_.reset();
}

int OpTracer::ring_buffer_fd() const { return bpf_map__fd(skeleton_->maps.op_records); }

uint64_t OpTracer::dropped_records() const {
  const int cpus = libbpf_num_possible_cpus();
  if (cpus <= 0) return 0;
  std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
  const __u32 slot = DROPPED_RECORDS_SLOT;
  if (bpf_map__lookup_elem(skeleton_->maps.dropped_records, &slot, sizeof(slot), per_cpu.data(),
                           per_cpu.size() * sizeof(uint64_t), 0) != 0)
    return 0;
  uint64_t total = 0;
  for (uint64_t count : per_cpu) total += count;
  return total;
}

}  // namespace tprof
