// Names a polymorphic object from its vptr: the vtable (a _ZTV... object symbol) the pointer
// lands in says the object's dynamic class. The BPF side reads an autograd Node's vptr;
// subtracting the library's load bias gives the link-time address looked up here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/autograd/node_names.h"

namespace tprof::symbolizer {

class VtableNames {
 public:
  // `symbols` (the library's, e.g. LibraryIndex::symbols) must outlive this.
  explicit VtableNames(const DefinedSymbols& symbols);

  // The class whose vtable holds `vptr_address` (a link-time address: the runtime vptr minus
  // the load bias), demangled: "torch::autograd::generated::MmBackward0". An object's vptr
  // points 16 bytes into its vtable, past offset-to-top and the typeinfo pointer. nullopt
  // when no vtable this file defines holds the address.
  std::optional<std::string> class_at(uint64_t vptr_address) const;

  // profiler_node_name(class_at(vptr_address)): "MmBackward0".
  std::optional<std::string> node_name_at(uint64_t vptr_address) const;

 private:
  const DefinedSymbols& symbols_;
};

}  // namespace tprof::symbolizer
