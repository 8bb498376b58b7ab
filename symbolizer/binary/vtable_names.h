// Names a polymorphic object from its vptr: the vtable (a _ZTV... object symbol) the pointer
// lands in says the object's dynamic class. The BPF side reads an autograd Node's vptr;
// subtracting the library's load bias gives the link-time address looked up here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/autograd/node_names.h"

namespace tprof::symbolizer {

class VtableNames {
 public:
  // An object the file defines, as DefinedSymbols has it.
  struct Object {
    uint64_t address = 0;
    uint64_t size = 0;
    std::string vtable;  // its mangled name when it is a vtable (_ZTV...); empty for any other object

    bool operator==(const Object&) const = default;
  };

  // Copies what it needs of `symbols`: names are asked for while recording, long after the
  // library's file was read and closed.
  explicit VtableNames(const DefinedSymbols& symbols);
  // `objects` as objects() gave them (the plan cache).
  explicit VtableNames(std::vector<Object> objects) : objects_(std::move(objects)) {}

  // Every object, by address: the others too, since a vptr in one of them is in no vtable.
  const std::vector<Object>& objects() const { return objects_; }

  // The class whose vtable holds `vptr_address` (a link-time address: the runtime vptr minus
  // the load bias), demangled: "torch::autograd::generated::MmBackward0". An object's vptr
  // points 16 bytes into its vtable, past offset-to-top and the typeinfo pointer. nullopt
  // when no vtable this file defines holds the address.
  std::optional<std::string> class_at(uint64_t vptr_address) const;

  // profiler_node_name(class_at(vptr_address)): "MmBackward0".
  std::optional<std::string> node_name_at(uint64_t vptr_address) const;

 private:
  std::vector<Object> objects_;
};

}  // namespace tprof::symbolizer
