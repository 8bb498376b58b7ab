// Where to probe libtorch_cpu to see autograd's backward pass the way torch's profiler does:
// it records "autograd::engine::evaluate_function: <node>" around Engine::evaluate_function
// and "<node>" around the node's apply(), and tags both with the node's sequence number and
// the thread that ran its forward op.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symbolizer/binary/library_index.h"

namespace tprof::symbolizer {

struct NodeApplySite {
  std::string class_name;  // as the profiler names the node: "MmBackward0",
                           // "torch::autograd::AccumulateGrad" (see profiler_node_name)
  // Of C::apply(std::vector<at::Tensor>&&). It returns the outputs vector in memory, so at
  // entry rdi = where that goes (sret), rsi = the node (this), rdx = the inputs vector.
  uint64_t file_offset = 0;
  uint64_t address = 0;  // link-time: where its exits are searched from
};

struct AutogradSites {
  // File offset of Engine::evaluate_function(std::shared_ptr<GraphTask>&, Node*, InputBuffer&,
  // std::shared_ptr<ReadyQueue> const&): rdi = the engine, rsi = &graph_task, rdx = the node.
  // 0 if the library does not export it.
  uint64_t evaluate_function = 0;
  uint64_t evaluate_function_address = 0;  // link-time; 0 with evaluate_function
  // The apply() of every exported class deriving from torch::autograd::Node, each address
  // once, sorted by class_name.
  std::vector<NodeApplySite> apply_sites;
  // Byte offsets into torch::autograd::Node of sequence_nr_ (uint64; UINT64_MAX, which the
  // profiler shows as -1, for nodes without a forward op such as AccumulateGrad) and
  // thread_id_ (uint64; RecordFunction::currentThreadId() of the forward op's thread), read
  // off this build's machine code; nullopt when that failed.
  std::optional<uint32_t> sequence_nr_offset;
  std::optional<uint32_t> thread_id_offset;
  std::string source;  // one line: what was found where, or why something is missing
};

AutogradSites find_autograd_sites(const LibraryIndex& libtorch_cpu);

}  // namespace tprof::symbolizer
