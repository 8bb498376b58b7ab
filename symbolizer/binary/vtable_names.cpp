#include "symbolizer/binary/vtable_names.h"

namespace tprof::symbolizer {

VtableNames::VtableNames(const DefinedSymbols& symbols) : symbols_(symbols) {}

std::optional<std::string> VtableNames::class_at(uint64_t vptr_address) const {
  const DefinedSymbol* vtable = symbols_.object_containing(vptr_address);
  if (vtable == nullptr || !vtable->name.starts_with("_ZTV")) return std::nullopt;
  return class_of_rtti_symbol(vtable->name);
}

std::optional<std::string> VtableNames::node_name_at(uint64_t vptr_address) const {
  std::optional<std::string> class_name = class_at(vptr_address);
  if (!class_name) return std::nullopt;
  return profiler_node_name(*class_name);
}

}  // namespace tprof::symbolizer
