#include "symbolizer/binary/vtable_names.h"

namespace tprof::symbolizer {

VtableNames::VtableNames(const DefinedSymbols& symbols) {
  objects_.reserve(symbols.objects().size());
  for (const DefinedSymbol& object : symbols.objects())
    objects_.push_back({object.address, object.size, object.name.starts_with("_ZTV") ? std::string(object.name) : ""});
}

std::optional<std::string> VtableNames::class_at(uint64_t vptr_address) const {
  const Object* vtable = symbol_containing(objects_, vptr_address);
  if (vtable == nullptr || vtable->vtable.empty()) return std::nullopt;
  return class_of_rtti_symbol(vtable->vtable);
}

std::optional<std::string> VtableNames::node_name_at(uint64_t vptr_address) const {
  std::optional<std::string> class_name = class_at(vptr_address);
  if (!class_name) return std::nullopt;
  return profiler_node_name(*class_name);
}

}  // namespace tprof::symbolizer
