// What a target is probed at, found before anything is attached, and the attaching itself:
// its libtorch ops (from the session's plan of the library file) with their TensorImpl
// calibration, the annotation and autograd probes, where every range ends, where ops' doubles
// are read, the CUDA API calls or the CUPTI library, and --memory's allocator probes. The
// recording (target_recording.h) plans with plan_attach() and plan_range_probes(), attaches with
// attach_probes() and starts with start_recording().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "symbolizer/aten/argument_plan.h"
#include "symbolizer/aten/tensor_impl_layout.h"
#include "symbolizer/binary/process_memory.h"
#include "symbolizer/python/python_runtime.h"
#include "userspace/cli/console.h"
#include "userspace/loader/cuda_api_probes.h"
#include "userspace/loader/exit_probes.h"
#include "userspace/loader/memory_probes.h"
#include "userspace/loader/op_tracer.h"
#include "userspace/loader/probe_plan.h"
#include "userspace/loader/range_probes.h"
#include "userspace/loader/spill_probes.h"
#include "userspace/session/attach_session.h"
#include "userspace/session/op_selection.h"
#include "userspace/session/target_process.h"
#include "userspace/session/torch_library_plan.h"

namespace tprof {

// libtprof_cupti.so, as the target maps it once CUDA has loaded it.
inline constexpr const char* kCuptiLibraryPrefix = "libtprof_cupti.so";

// The libtorch ops to probe, or none for a Python process without torch.
struct OpProbes {
  MappedLibrary library;
  std::shared_ptr<const TorchLibraryPlan> library_plan;  // shared by every target mapping the file
  ProbePlan plan;  // the library plan's, in this target's file, and then its CUDA API calls
  // With shapes: how to read each op's arguments (by op id), and the TensorImpl layout.
  std::vector<symbolizer::OpArgumentPlan> argument_plans;
  std::optional<symbolizer::TensorImplLayout> tensor_layout;
  uint64_t undefined_tensor_impl = 0;  // c10::UndefinedTensorImpl's singleton in the target; 0: unknown
  PlanSource plan_source = PlanSource::kPlanned;  // of library_plan
  SelectedOps selected;     // which ops' entries and returns are probed (--ops, --skip-ops, --no-view-ops)
  std::string left_out_by;  // the options that left some out
};

// Everything found before attaching: what to probe in the target.
struct AttachPlan {
  std::optional<symbolizer::PythonLayout> python;
  std::optional<OpProbes> ops;
  std::optional<RangeProbes> range_probes;
  // Where dynamo names each call of a compiled graph, in the target's libtorch_python (torch 2.x
  // with record_function()'s probes): a cookie per site, the argument that holds the name.
  std::optional<UprobeSites> compiled_regions;
  // Whether the target's torch has dynamo (torch 2.x), whose inductor may load kernels while the
  // target runs, whatever tprof records of it.
  bool has_dynamo = false;
  // Where ops called through torch.ops.<ns>.<op>.<overload> pass, in libtorch_python: its entry
  // and its `ret`s.
  struct BoxedOps {
    UprobeSites entry;
    UprobeSites returns;
  };
  std::optional<BoxedOps> boxed_ops;
  // c10's wait counters, in libc10 (torch 2.x): how tprof times dynamo's compiles.
  struct WaitCounters {
    UprobeSites constructor;
    UprobeSites constructed;  // the constructor's `ret`s
    UprobeSites start;
    UprobeSites stop;
  };
  std::optional<WaitCounters> wait_counters;
  std::optional<ExitProbes> exits;
  SpillProbes spills;                          // where ops' doubles are read, with shapes
  std::optional<MappedLibrary> cupti_library;  // libtprof_cupti.so, where the target loaded it
  CudaApiProbes cuda_api;                      // without it: CUDA API calls through uprobes
  std::string gpu;                             // what the trace says of GPU timing
  std::optional<MemoryProbes> memory;          // --memory
};

AttachPlan plan_attach(const AttachOptions& options, const TargetProcess& target, TorchLibraryPlans& library_plans,
                       Console& console);

// The probes beyond the ops' entries: annotations, autograd, where every range ends, and where
// the ops' doubles are read.
void plan_range_probes(AttachPlan& plan, const TargetProcess& target, Console& console);

// --max-overhead: the sites of the ops the target has called (`called`, by op id) and, unless
// `every_node_class`, of the node classes whose vtables it was seen to use: their entries,
// doubles and `ret`s (Engine::evaluate_function's too: a single site).
TargetProbes::WindowSites sites_called_so_far(const AttachPlan& plan, const std::vector<bool>& called,
                                              bool every_node_class,
                                              const std::unordered_set<uint64_t>& node_vtables,
                                              const symbolizer::ProcessMemory& memory);

// --max-overhead: the first-call guard of each op (symbolizer/aten/op_call_guards.h), by op id.
std::vector<uint64_t> find_op_call_guards(const OpProbes& ops);

// Attaches every planned probe but the CUPTI library's; they stay silent until
// start_recording(). Exits before entries, like the partners they are. The stack sampler
// serves every target; it is attached with the first that has Python stacks (0 Hz: none).
void attach_probes(TargetProbes& probes, OpTracer& tracer, AttachPlan& plan, uint32_t sample_hz);

// Starts recording, then wakes the CUPTI library: it sends the GPUs' properties as it wakes,
// which a probe not yet recording would drop.
void start_recording(TargetProbes& probes, AttachPlan& plan, Console& console);

}  // namespace tprof
