#include "userspace/loader/range_probes.h"

#include <exception>

#include "symbolizer/autograd/sequence_counter.h"

namespace tprof {
namespace {

// Where the dynamic linker stores the {module id, offset} pair of libtorch's __tls_get_addr
// call for the counter, in the target; the probes read it there, once it is relocated.
std::optional<RangeProbes::SequenceCounterTls> locate_sequence_counter(const symbolizer::LibraryIndex& library,
                                                                        uint64_t load_address, std::string* why_not) {
  const auto location = symbolizer::find_sequence_counter(library, why_not);
  if (!location) return std::nullopt;
  return RangeProbes::SequenceCounterTls{load_address + location->tls_index_address, location->field_offset};
}

}  // namespace

RangeSites::RangeSites(const std::string& host_path)
    : elf_(std::make_unique<symbolizer::ElfFile>(host_path)), index_(std::make_unique<symbolizer::LibraryIndex>(*elf_)) {
  // Each of these is extra to the ops: a library they cannot read is said once per target, and
  // the ops are recorded anyway.
  try {
    annotations_ = symbolizer::find_record_function_sites(*index_);
  } catch (const std::exception& error) {
    annotations_.source = error.what();
  }
  annotations_found_ = !annotations_.enter_functions.empty() && annotations_.user_scope_constructor != 0 &&
                       annotations_.end != 0;
  try {
    autograd_ = symbolizer::find_autograd_sites(*index_);
    if (autograd_.evaluate_function != 0) vtables_.emplace(index_->symbols);
  } catch (const std::exception& error) {
    autograd_ = {};
    autograd_.source = error.what();
  }
  autograd_found_ = autograd_.evaluate_function != 0 && vtables_.has_value();
}

std::vector<uint64_t> RangeSites::range_function_addresses() const {
  std::vector<uint64_t> addresses;
  if (!autograd_found_) return addresses;
  addresses.push_back(autograd_.evaluate_function_address);
  for (const auto& site : autograd_.apply_sites) addresses.push_back(site.address);
  return addresses;
}

RangeProbes::RangeProbes(std::shared_ptr<const RangeSites> sites, const MappedLibrary& torch_library,
                         Console& console)
    : sites_(std::move(sites)), library_(torch_library) {
  if (!sites_->annotations_found_)
    console.line("warning: no record_function() entry points found in " + torch_library.path_in_target +
                 "; user annotations are not recorded (" + sites_->annotations_.source + ")");
  if (!sites_->autograd_found_) {
    console.line("warning: no torch::autograd::Engine::evaluate_function in " + torch_library.path_in_target +
                 "; backward nodes are not recorded (" + sites_->autograd_.source + ")");
    return;
  }
  std::string why_not;
  try {
    sequence_counter_ = locate_sequence_counter(*sites_->index_, torch_library.load_address, &why_not);
  } catch (const std::exception& error) {
    why_not = error.what();
  }
  if (!sequence_counter_) console.line("warning: backward nodes are not linked to forward ops: " + why_not);
}

uint32_t RangeProbes::node_sequence_nr_offset() const { return sites_->autograd_.sequence_nr_offset.value_or(0); }
uint32_t RangeProbes::node_thread_id_offset() const { return sites_->autograd_.thread_id_offset.value_or(0); }

UprobeSites RangeProbes::sites(const std::vector<uint64_t>& file_offsets) const {
  UprobeSites sites;
  sites.binary_path = library_.host_path;
  sites.offsets.assign(file_offsets.begin(), file_offsets.end());
  sites.cookies.assign(file_offsets.size(), 0);
  return sites;
}

void RangeProbes::attach(TargetProbes& probes) const {
  const RangeSites& found = *sites_;
  if (found.annotations_found_)
    probes.attach_annotations(sites(found.annotations_.enter_functions),
                              sites({found.annotations_.user_scope_constructor}), sites({found.annotations_.end}));
  if (found.autograd_found_) {
    std::vector<uint64_t> apply_offsets;
    for (const auto& site : found.autograd_.apply_sites) apply_offsets.push_back(site.file_offset);
    probes.attach_autograd(sites({found.autograd_.evaluate_function}), sites(apply_offsets));
  }
}

std::string RangeProbes::node_name(uint64_t vptr) const {
  if (!sites_->vtables_ || vptr < library_.load_address) return "";
  return sites_->vtables_->node_name_at(vptr - library_.load_address).value_or("");
}

}  // namespace tprof
