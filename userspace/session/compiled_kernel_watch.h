// Inductor's C++ kernels appear while the target runs: torch.compile builds one library per
// fused kernel and imports it (symbolizer/dynamo/inductor_kernels.h). The watch reads the
// target's mappings as the probes go in and as the recording begins, then whenever the target's
// dynamic loader has mapped something (a probe on its _dl_debug_state counts its dlopens while
// recording; the recording loop asks at every drain, 20 ms), or once a second where the loader
// could not be probed. Where tprof holds the target at its loads (`tprof record`:
// userspace/session/process_holder.h), it looks while the loading thread waits, so that a kernel
// is probed before its first call. It probes the kernel of each library it has not seen that is
// one of inductor's: an entry probe and its
// `ret`s (no uretprobe, as for ops: exit_probes.h). Each kernel becomes an operator of the
// recording's table, named as inductor's generated module binds it, with its generated source.
// --ops and --skip-ops select kernels by that name as they select ops: one left out is not
// probed, and its calls cost the target nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "model/trace_model.h"
#include "symbolizer/dynamo/inductor_kernels.h"
#include "userspace/cli/console.h"
#include "userspace/loader/op_tracer.h"
#include "userspace/session/op_selection.h"
#include "userspace/session/target_process.h"

namespace tprof {

// Whether a library of the target may be one of inductor's kernels: its cache names them
// <2 chars>/c<hash>[.main].so.
bool may_be_inductor_kernel_library(std::string_view path_in_target);

// Where an inductor kernel library is probed: its `kernel`'s entry, or the first `push` or
// conditional jump of its prologue when nothing before it moves the stack pointer and it lies
// before any loop (symbolizer/binary/emulated_probe_point.h), and its `ret`s (cookies left to the
// caller). nullopt: the library holds no inductor kernel. Throws on one that cannot be read.
struct InductorKernelSites {
  UprobeSites entry;
  UprobeSites returns;
};
std::optional<InductorKernelSites> inductor_kernel_sites(const std::string& host_path);

class CompiledKernelWatch {
 public:
  // Appends an operator to the recording's table and returns its index (the probes' cookie).
  using AddOperator = std::function<uint32_t(model::Operator)>;
  // All must outlive the watch.
  CompiledKernelWatch(const TargetProcess& target, TargetProbes& probes, const OpSelection& selection,
                      AddOperator add_operator, Console& console);

  // Probes the target's dynamic loader, where it can, and looks for kernel libraries now.
  void start();
  // Looks for kernel libraries now: as the recording begins, since the loader probe counts only
  // while recording.
  void look();
  // Looks again if the loader has mapped something since the last look; without a loader probe,
  // once a second has passed.
  void look_if_due(uint64_t now_ns);

 private:
  enum class Kernel { kNone, kProbed, kLeftOut };
  // Probes the kernel of `library` unless the selection leaves it out, and sets `name`; kNone
  // when it is no kernel library. Throws on a library that cannot be read or probed.
  Kernel probe(const MappedLibrary& library, std::string& name);
  // "torch.compile: probing 3 new inductor C++ kernels (cpp_fused_add_0, ...)[: why]".
  void say_found(const std::string& what, const std::vector<std::string>& names, const std::string& why);

  const TargetProcess& target_;
  TargetProbes& probes_;
  const OpSelection& selection_;
  AddOperator add_operator_;
  Console& console_;
  symbolizer::InductorKernelNames names_;
  std::unordered_set<std::string> seen_;  // paths in the target, each looked at once
  uint64_t last_look_ns_ = 0;
  bool loader_probed_ = false;
  uint64_t loads_seen_ = 0;  // the loader's notifications counted at the last look
};

}  // namespace tprof
