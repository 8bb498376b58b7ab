// Inductor's C++ kernels appear while the target runs: torch.compile builds one library per
// fused kernel and imports it (symbolizer/dynamo/inductor_kernels.h). The watch reads the
// target's mappings as the recording begins and then every few hundred milliseconds, and probes
// the kernel of each library it has not seen that is one of inductor's: an entry probe and its
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

  // Looks for new kernel libraries now.
  void look();
  // Looks again once the period has passed since the last look.
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
};

}  // namespace tprof
