#include "symbolizer/autograd/autograd_sites.h"

#include <algorithm>
#include <unordered_set>

#include "symbolizer/binary/class_hierarchy.h"
#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/autograd/node_field_offsets.h"
#include "symbolizer/autograd/node_names.h"
#include "symbolizer/binary/relocations.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {
namespace {

constexpr std::string_view kEvaluateFunction =
    "_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS"
    "0_11InputBufferERKS2_INS0_10ReadyQueueEE";
constexpr std::string_view kNodeTypeinfo = "_ZTIN5torch8autograd4NodeE";

// <nested-name prefix>5applyE, then the parameter `std::vector<at::Tensor>&&`:
// O St6vector I N2at6TensorE SaI S<n>_ E E, where S<n>_ is a back reference to at::Tensor
// whose number depends on how many components came before.
constexpr std::string_view kNestedNameStart = "_ZN";
constexpr std::string_view kApplyOfTensorVector = "5applyEOSt6vectorIN2at6TensorESaIS";
constexpr std::string_view kParameterEnd = "_EE";

// "5torch8autograd9generated11MmBackward0" (the class's nested-name components) for
// "_ZN5torch8autograd9generated11MmBackward05applyEOSt6vectorIN2at6TensorESaIS5_EE"; nullopt
// for other symbols, including const or ref-qualified apply (Node::apply is neither).
std::optional<std::string_view> class_of_apply_symbol(std::string_view mangled) {
  if (!mangled.starts_with(kNestedNameStart)) return std::nullopt;
  const size_t apply = mangled.rfind(kApplyOfTensorVector);
  if (apply == std::string_view::npos || apply <= kNestedNameStart.size()) return std::nullopt;
  std::string_view back_reference = mangled.substr(apply + kApplyOfTensorVector.size());
  if (!back_reference.ends_with(kParameterEnd)) return std::nullopt;
  back_reference.remove_suffix(kParameterEnd.size());
  const bool is_sequence_id = std::all_of(back_reference.begin(), back_reference.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
  });
  if (!is_sequence_id) return std::nullopt;
  const std::string_view components =
      mangled.substr(kNestedNameStart.size(), apply - kNestedNameStart.size());
  if (components.front() == 'K' || components.front() == 'R' || components.front() == 'O') {
    return std::nullopt;
  }
  return components;
}

}  // namespace

AutogradSites find_autograd_sites(const LibraryIndex& libtorch_cpu) {
  const SectionMap& sections = libtorch_cpu.sections;
  const DefinedSymbols& symbols = libtorch_cpu.symbols;
  const Relocations& relocations = libtorch_cpu.relocations;
  const ClassHierarchy hierarchy(symbols, relocations, sections);
  AutogradSites sites;
  const DefinedSymbol* evaluate_function = symbols.find(kEvaluateFunction);
  sites.evaluate_function = probe_offset(evaluate_function, sections);
  if (sites.evaluate_function) sites.evaluate_function_address = evaluate_function->address;

  // Any class deriving from Node overrides Node::apply with a member function of this exact
  // name and parameter list; other classes' apply(std::vector<at::Tensor>&&) are not nodes.
  size_t not_nodes = 0;
  std::unordered_set<uint64_t> probed_addresses;
  for (const DefinedSymbol& function : symbols.functions()) {
    const std::optional<std::string_view> components = class_of_apply_symbol(function.name);
    if (!components) continue;
    const std::string typeinfo = "_ZTIN" + std::string(*components) + "E";
    if (!hierarchy.derives_from(typeinfo, kNodeTypeinfo)) {
      ++not_nodes;
      continue;
    }
    const std::optional<std::string> class_name = class_of_rtti_symbol(typeinfo);
    const std::optional<uint64_t> file_offset = sections.file_offset_of(function.address);
    if (!class_name || !file_offset) continue;
    // Identical bodies folded into one: a probe there cannot tell the classes apart, so the
    // site is listed once (the BPF side names the node from its vptr anyway).
    if (!probed_addresses.insert(function.address).second) continue;
    sites.apply_sites.push_back({profiler_node_name(*class_name), *file_offset, function.address});
  }
  std::sort(
      sites.apply_sites.begin(), sites.apply_sites.end(),
      [](const NodeApplySite& a, const NodeApplySite& b) { return a.class_name < b.class_name; });

  const NodeFieldOffsets offsets =
      find_node_field_offsets(libtorch_cpu.elf, symbols, relocations, sections);
  sites.sequence_nr_offset = offsets.sequence_nr;
  sites.thread_id_offset = offsets.thread_id;
  sites.source = std::string(sites.evaluate_function ? "Engine::evaluate_function exported"
                                                     : "Engine::evaluate_function not exported") +
                 "; " + std::to_string(sites.apply_sites.size()) + " Node::apply overrides (" +
                 std::to_string(not_nodes) + " other apply(std::vector<at::Tensor>&&) skipped); " +
                 offsets.source;
  return sites;
}

}  // namespace tprof::symbolizer
