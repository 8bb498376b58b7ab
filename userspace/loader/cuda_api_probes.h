// CUDA API calls seen without CUPTI: uprobes on libcudart's and libcuda's launch, copy and sync
// entry points, for a target that did not load libtprof_cupti.so. Each probed function becomes
// an operator of the op tracer's table (RangeKind kCudaRuntime or kCudaDriver), entered through
// its own entry program (no arguments, no Python stack) and closed at its `ret` instructions
// like an op: it then nests inside the
// op that called it, and the trace shows it as a cuda_runtime/cuda_driver event with that op's
// External id. No uretprobe, as for ops (exit_probes.h).
#pragma once

#include <cstdint>
#include <vector>

#include "model/trace_model.h"
#include "userspace/loader/uprobe_multi.h"
#include "userspace/session/target_process.h"

namespace tprof {

struct CudaApiProbes {
  std::vector<UprobeSites> entries;  // per library; cookies are operator indices
  std::vector<UprobeSites> returns;  // per library
  size_t functions = 0;              // entry points found
};

// Finds the entry points in the libraries the target maps and appends one operator per
// function found to `operators` (its index is the sites' cookie). Libraries or functions the
// target lacks are skipped; nothing found gives empty probes.
CudaApiProbes plan_cuda_api_probes(const TargetProcess& target, std::vector<model::Operator>& operators);

}  // namespace tprof
