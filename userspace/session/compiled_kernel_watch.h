// Inductor's C++ kernels appear while the target runs: torch.compile builds one library per
// fused kernel and imports it (symbolizer/dynamo/inductor_kernels.h). The watch reads the
// target's mappings as the probes go in and as the recording begins, then whenever the target's
// dynamic loader has mapped something (a probe on its _dl_debug_state counts its dlopens while
// recording; the recording loop asks at every drain, 20 ms), or once a second where the loader
// could not be probed. It probes the kernel of each library it has not seen that is one of
// inductor's: an entry probe and its
// `ret`s (no uretprobe, as for ops: exit_probes.h). Each kernel becomes an operator of the
// recording's table, named as inductor's generated module binds it, with its generated source.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>

#include "model/trace_model.h"
#include "symbolizer/dynamo/inductor_kernels.h"
#include "userspace/cli/console.h"
#include "userspace/loader/op_tracer.h"
#include "userspace/session/target_process.h"

namespace tprof {

class CompiledKernelWatch {
 public:
  // Appends an operator to the recording's table and returns its index (the probes' cookie).
  using AddOperator = std::function<uint32_t(model::Operator)>;
  // All must outlive the watch.
  CompiledKernelWatch(const TargetProcess& target, TargetProbes& probes, AddOperator add_operator, Console& console);

  // Probes the target's dynamic loader, where it can, and looks for kernel libraries now.
  void start();
  // Looks for kernel libraries now: as the recording begins, since the loader probe counts only
  // while recording.
  void look();
  // Looks again if the loader has mapped something since the last look; without a loader probe,
  // once a second has passed.
  void look_if_due(uint64_t now_ns);

 private:
  // Whether a new mapping is worth opening: inductor's cache names it <2 chars>/c<hash>[.main].so.
  static bool may_be_kernel_library(std::string_view path_in_target);
  // Probes the kernel of `library` and sets `name`; false when it is no kernel library. Throws
  // on a library that cannot be read or probed.
  bool probe(const MappedLibrary& library, std::string& name);

  const TargetProcess& target_;
  TargetProbes& probes_;
  AddOperator add_operator_;
  Console& console_;
  symbolizer::InductorKernelNames names_;
  std::unordered_set<std::string> seen_;  // paths in the target, each looked at once
  uint64_t last_look_ns_ = 0;
  bool loader_probed_ = false;
  uint64_t loads_seen_ = 0;  // the loader's notifications counted at the last look
};

}  // namespace tprof
