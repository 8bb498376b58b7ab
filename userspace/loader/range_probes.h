// The probes beyond ATen ops that give what torch's RecordFunction would show: record_function()
// ranges (user annotations) and the autograd engine's backward nodes. Found in the target's
// libtorch_cpu; whatever is missing there is said once on the console and left out.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <sys/types.h>

#include "symbolizer/autograd/autograd_sites.h"
#include "symbolizer/binary/library_index.h"
#include "symbolizer/binary/process_memory.h"
#include "symbolizer/autograd/record_function_sites.h"
#include "symbolizer/autograd/sequence_counter.h"
#include "symbolizer/binary/vtable_names.h"
#include "userspace/cli/console.h"
#include "userspace/loader/op_tracer.h"
#include "userspace/session/target_process.h"

namespace tprof {

// What libtorch_cpu holds for these ranges, found once for every process that maps it
// (find_range_sites), or read back from the plan cache: the record_function() and autograd
// entry points, the node classes' vtables, where the autograd sequence counter is. Nothing here
// reads the file again: tprof keeps recording with the library closed.
struct RangeSites {
  symbolizer::RecordFunctionSites annotations;
  symbolizer::AutogradSites autograd;
  std::optional<symbolizer::VtableNames> vtables;  // with autograd's evaluate_function
  // With autograd's evaluate_function: where the counter is, or why that is not known.
  std::optional<symbolizer::SequenceCounterLocation> sequence_counter;
  std::string no_sequence_counter_why;

  bool annotations_found() const;
  bool autograd_found() const;
  // Link-time addresses of the probed autograd functions, whose `ret`s close their ranges.
  std::vector<uint64_t> range_function_addresses() const;
};

// Searches libtorch_cpu's code; what is missing is kept as a reason, not thrown.
RangeSites find_range_sites(const symbolizer::LibraryIndex& library);

// The ranges of one target: the library's sites where the target maps it, and its autograd
// sequence counter.
class RangeProbes {
 public:
  RangeProbes(std::shared_ptr<const RangeSites> sites, const MappedLibrary& torch_library,
              Console& console);

  // Where torch::autograd::Node keeps these (for TargetOptions); 0: unknown.
  uint32_t node_sequence_nr_offset() const;
  uint32_t node_thread_id_offset() const;

  // Where each thread's autograd sequence counter is (for TargetOptions): the target's address
  // of libtorch's TLS index for it, and the counter's offset from that variable; none when it
  // could not be located.
  struct SequenceCounterTls {
    uint64_t tls_index_address = 0;
    uint64_t field_offset = 0;
  };
  const std::optional<SequenceCounterTls>& sequence_counter() const { return sequence_counter_; }

  // Whether record_function()'s ranges are probed: the kernels, the constructor and end().
  bool records_annotations() const { return sites_->annotations_found(); }
  // Attaches every probe that was found.
  void attach(TargetProbes& probes) const;
  // The apply() sites of the node classes whose vtables (runtime vptrs) the target was seen
  // to use: an apply() pointer among each vtable's first slots, read from the target's memory
  // (a class without an override of its own runs its base's). --max-overhead's windows probe
  // only these after the first.
  UprobeSites node_apply_sites(const std::unordered_set<uint64_t>& vtables,
                               const symbolizer::ProcessMemory& memory) const;

  // A node's name as torch's profiler shows it, from its runtime vtable pointer; "" if unknown.
  std::string node_name(uint64_t vptr) const;

 private:
  UprobeSites sites(const std::vector<uint64_t>& file_offsets) const;  // in libtorch_cpu

  std::shared_ptr<const RangeSites> sites_;
  MappedLibrary library_;
  std::optional<SequenceCounterTls> sequence_counter_;
};

}  // namespace tprof
