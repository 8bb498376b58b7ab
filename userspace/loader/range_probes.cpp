#include "userspace/loader/range_probes.h"

#include <array>
#include <exception>
#include <set>
#include <unordered_map>

#include "symbolizer/autograd/sequence_counter.h"

namespace tprof {
namespace {

// Where the counter is, read off the library's code; an exception is a reason like any other.
void note_sequence_counter(const symbolizer::LibraryIndex& library, RangeSites& sites) {
  try {
    sites.sequence_counter = symbolizer::find_sequence_counter(library, &sites.no_sequence_counter_why);
  } catch (const std::exception& error) {
    sites.no_sequence_counter_why = error.what();
  }
}

}  // namespace

RangeSites find_range_sites(const symbolizer::LibraryIndex& library) {
  RangeSites sites;
  // Each of these is extra to the ops: a library they cannot read is said once per target, and
  // the ops are recorded anyway.
  try {
    sites.annotations = symbolizer::find_record_function_sites(library);
  } catch (const std::exception& error) {
    sites.annotations.source = error.what();
  }
  try {
    sites.autograd = symbolizer::find_autograd_sites(library);
    if (sites.autograd.evaluate_function != 0) sites.vtables.emplace(library.symbols);
  } catch (const std::exception& error) {
    sites.autograd = {};
    sites.autograd.source = error.what();
  }
  if (sites.autograd_found()) note_sequence_counter(library, sites);
  return sites;
}

bool RangeSites::annotations_found() const {
  return !annotations.enter_functions.empty() && annotations.user_scope_constructor != 0 && annotations.end != 0;
}

bool RangeSites::autograd_found() const { return autograd.evaluate_function != 0 && vtables.has_value(); }

std::vector<uint64_t> RangeSites::range_function_addresses() const {
  std::vector<uint64_t> addresses;
  if (!autograd_found()) return addresses;
  addresses.push_back(autograd.evaluate_function_address);
  for (const auto& site : autograd.apply_sites) addresses.push_back(site.address);
  return addresses;
}

RangeProbes::RangeProbes(std::shared_ptr<const RangeSites> sites, const MappedLibrary& torch_library,
                         Console& console)
    : sites_(std::move(sites)), library_(torch_library) {
  if (!sites_->annotations_found())
    console.line("warning: no record_function() entry points found in " + torch_library.path_in_target +
                 "; user annotations are not recorded (" + sites_->annotations.source + ")");
  if (!sites_->autograd_found()) {
    console.line("warning: no torch::autograd::Engine::evaluate_function in " + torch_library.path_in_target +
                 "; backward nodes are not recorded (" + sites_->autograd.source + ")");
    return;
  }
  // The probes read the {module id, offset} pair the dynamic linker stores there for
  // __tls_get_addr, once it is relocated (a process held at torch's load is not yet).
  if (!sites_->sequence_counter) {
    console.line("warning: backward nodes are not linked to forward ops: " + sites_->no_sequence_counter_why);
    return;
  }
  sequence_counter_ = SequenceCounterTls{torch_library.load_address + sites_->sequence_counter->tls_index_address,
                                         sites_->sequence_counter->field_offset};
}

uint32_t RangeProbes::node_sequence_nr_offset() const { return sites_->autograd.sequence_nr_offset.value_or(0); }
uint32_t RangeProbes::node_thread_id_offset() const { return sites_->autograd.thread_id_offset.value_or(0); }

UprobeSites RangeProbes::sites(const std::vector<uint64_t>& file_offsets) const {
  UprobeSites sites;
  sites.binary_path = library_.host_path;
  sites.offsets.assign(file_offsets.begin(), file_offsets.end());
  sites.cookies.assign(file_offsets.size(), 0);
  return sites;
}

void RangeProbes::attach(TargetProbes& probes) const {
  const RangeSites& found = *sites_;
  if (found.annotations_found())
    probes.attach_annotations(sites(found.annotations.enter_functions),
                              sites({found.annotations.user_scope_constructor}), sites({found.annotations.end}));
  if (found.autograd_found()) {
    std::vector<uint64_t> apply_offsets;
    for (const auto& site : found.autograd.apply_sites) apply_offsets.push_back(site.file_offset);
    probes.attach_autograd(sites({found.autograd.evaluate_function}), sites(apply_offsets));
  }
}

UprobeSites RangeProbes::node_apply_sites(const std::unordered_set<uint64_t>& vtables,
                                          const symbolizer::ProcessMemory& memory) const {
  // Node's virtual functions come first in each vtable, apply() among them, and a class's own
  // follow: the first 32 slots hold apply() on torch 1.13, 2.6 and 2.14 (later windows' steps
  // hold every node range: e2e OverheadBudget.*, bench/budget_torch_roots.py). A class whose
  // apply() is not found has its evaluate_function range, not its node range.
  constexpr size_t kSlotsSearched = 32;
  std::unordered_map<uint64_t, uint64_t> offset_of_apply;  // runtime address -> file offset
  for (const auto& site : sites_->autograd.apply_sites)
    offset_of_apply.emplace(library_.load_address + site.address, site.file_offset);
  std::set<uint64_t> offsets;
  std::array<uint64_t, kSlotsSearched> slots{};
  for (const uint64_t vptr : vtables) {
    if (!memory.read(vptr, slots.data(), sizeof(slots))) continue;
    for (const uint64_t slot : slots)
      if (const auto apply = offset_of_apply.find(slot); apply != offset_of_apply.end()) offsets.insert(apply->second);
  }
  return sites({offsets.begin(), offsets.end()});
}

std::string RangeProbes::node_name(uint64_t vptr) const {
  if (!sites_->vtables || vptr < library_.load_address) return "";
  return sites_->vtables->node_name_at(vptr - library_.load_address).value_or("");
}

}  // namespace tprof
