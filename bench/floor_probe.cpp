// The benchmark floor: attaches empty BPF programs (bpf/probe_floor.bpf.c) to exactly the op
// entry sites tprof probes, the `ret` sites of those functions and __cxa_begin_catch, in the
// same uprobe_multi mode, and holds them until SIGINT/SIGTERM or the target's exit. Its cost
// is the uprobe traps alone. With --memory, also the sites of tprof --memory (the allocators'
// reports in libc10, userspace/loader/memory_probes.h). With --inductor-kernels, only the sites
// tprof gives the inductor C++ kernels the target has loaded by then (each kernel's entry and
// `ret`s, userspace/session/compiled_kernel_watch.h), and no op site.
//
//   tprof-floor-probe PID [--memory | --inductor-kernels]
#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "probe_floor.skel.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/library_index.h"
#include "symbolizer/aten/op_catalog.h"
#include "userspace/cli/error.h"
#include "userspace/loader/exit_probes.h"
#include "userspace/loader/memory_probes.h"
#include "userspace/loader/probe_plan.h"
#include "userspace/session/compiled_kernel_watch.h"
#include "userspace/session/stop_signals.h"
#include "userspace/session/target_process.h"
#include "userspace/loader/uprobe_multi.h"
#include "userspace/assemble/wall_clock.h"

namespace {

struct SkeletonDeleter {
  void operator()(probe_floor* skeleton) const { probe_floor__destroy(skeleton); }
};

void wait_for_stop(const tprof::UniqueFd& stop_signals, const tprof::TargetProcess& target) {
  pollfd waits[2] = {{stop_signals.get(), POLLIN, 0}, {target.exit_notifier().get(), POLLIN, 0}};
  while (::poll(waits, 2, -1) < 0) {
  }
}

std::unique_ptr<probe_floor, SkeletonDeleter> load_floor_programs() {
  std::unique_ptr<probe_floor, SkeletonDeleter> skeleton(probe_floor__open_and_load());
  if (!skeleton) throw tprof::Error("cannot load the floor BPF programs");
  return skeleton;
}

// The kernels' sites alone, as tprof's CompiledKernelWatch probes them: returns, then entries.
int run_on_inductor_kernels(pid_t pid) {
  tprof::TargetProcess target(pid);
  const auto skeleton = load_floor_programs();
  const tprof::UniqueFd stop_signals = tprof::block_stop_signals();
  const uint64_t start_ns = tprof::monotonic_now_ns();
  std::vector<tprof::BpfLink> links;
  size_t kernels = 0, returns = 0;
  for (const tprof::MappedLibrary& library : target.mapped_libraries(tprof::may_be_inductor_kernel_library)) {
    const auto sites = tprof::inductor_kernel_sites(library.host_path);
    if (!sites) continue;
    if (!sites->returns.offsets.empty())
      links.push_back(tprof::attach_uprobe_multi(skeleton->progs.op_return, pid, sites->returns));
    links.push_back(tprof::attach_uprobe_multi(skeleton->progs.op_enter, pid, sites->entry));
    ++kernels;
    returns += sites->returns.offsets.size();
  }
  if (kernels == 0) throw tprof::Error("process " + std::to_string(pid) + " has loaded no inductor C++ kernel");
  std::fprintf(stderr, "tprof-floor-probe: attached %zu op sites (%zu return sites) of inductor kernels in %.1f ms\n",
               kernels, returns, static_cast<double>(tprof::monotonic_now_ns() - start_ns) / 1e6);
  wait_for_stop(stop_signals, target);
  return 0;
}

int run_on_ops(pid_t pid, bool memory) {
  tprof::TargetProcess target(pid);
  const auto library = target.find_mapped_library("libtorch_cpu.so");
  if (!library) throw tprof::Error("process " + std::to_string(pid) + " has not loaded libtorch_cpu");
  const tprof::ProbePlan plan = tprof::plan_op_probes(tprof::symbolizer::build_op_catalog(library->host_path),
                                                      library->host_path);
  const tprof::symbolizer::ElfFile elf(library->host_path);
  const tprof::symbolizer::LibraryIndex index(elf);
  const tprof::ExitProbes exits =
      tprof::plan_exit_probes(library->host_path,
                              tprof::probed_return_offsets(tprof::plan_return_sites(index, plan.addresses),
                                                           [](uint32_t) { return true; }),
                              target);
  const auto skeleton = load_floor_programs();
  const tprof::UniqueFd stop_signals = tprof::block_stop_signals();

  const uint64_t start_ns = tprof::monotonic_now_ns();
  // As tprof does: the same sites, exits first.
  const tprof::BpfLink returns = tprof::attach_uprobe_multi(skeleton->progs.op_return, pid, exits.returns);
  std::optional<tprof::BpfLink> catches;
  if (!exits.catches.offsets.empty())
    catches = tprof::attach_uprobe_multi(skeleton->progs.exception_caught, pid, exits.catches);
  const tprof::BpfLink entries = tprof::attach_uprobe_multi(skeleton->progs.op_enter, pid, plan.sites);
  std::vector<tprof::BpfLink> memory_links;
  if (memory) {
    std::string why;
    const auto sites = tprof::plan_memory_probes(target, &why);
    if (!sites) throw tprof::Error("--memory: " + why);
    for (const tprof::UprobeSites* reports : {&sites->frees, &sites->allocations, &sites->device_reports})
      if (!reports->offsets.empty())
        memory_links.push_back(tprof::attach_uprobe_multi(skeleton->progs.memory_report, pid, *reports));
  }
  std::fprintf(stderr, "tprof-floor-probe: attached %zu op sites (%zu return sites) in %.1f ms\n",
               plan.sites.offsets.size(), exits.returns.offsets.size(),
               static_cast<double>(tprof::monotonic_now_ns() - start_ns) / 1e6);

  wait_for_stop(stop_signals, target);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string_view option = argc == 3 ? argv[2] : "";
  if ((argc != 2 && argc != 3) || (argc == 3 && option != "--memory" && option != "--inductor-kernels")) {
    std::fprintf(stderr, "usage: tprof-floor-probe PID [--memory | --inductor-kernels]\n");
    return 2;
  }
  try {
    const auto pid = static_cast<pid_t>(std::atoi(argv[1]));
    return option == "--inductor-kernels" ? run_on_inductor_kernels(pid) : run_on_ops(pid, option == "--memory");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "tprof-floor-probe: error: %s\n", error.what());
    return 1;
  }
}
