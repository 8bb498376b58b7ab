// The ATen operators of one libtorch_cpu: every at::_ops::<op>::call entry point, where it
// lives in the file, and the schema it implements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tprof::symbolizer {

struct OpCallSite {
  std::string unambiguous_name;  // the struct name in at::_ops: "add_Tensor", "__and___Tensor"
  std::string mangled_symbol;    // "_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE"
  uint64_t symbol_address = 0;   // st_value
  uint64_t file_offset = 0;      // where a uprobe goes: st_value mapped through its section
};

struct OpCatalogEntry {
  OpCallSite site;
  std::string op_name;   // "aten::add" (what torch.profiler shows)
  std::string overload;  // "Tensor"; empty for the default overload
  std::string schema;    // "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor";
                         // empty when no schema was found
};

struct OpCatalog {
  std::vector<OpCatalogEntry> entries;  // sorted by unambiguous_name
  size_t unresolved_count = 0;          // entries without a schema (name derived from the symbol)
  std::vector<std::string> collisions;  // unambiguous names that matched more than one schema,
                                        // one line each describing the candidates and the choice
};

// Reads the ELF file at `library_path` (e.g. /proc/PID/root/usr/lib/.../libtorch_cpu.so.1.13)
// with libelf. Throws std::runtime_error with a one-line message on failure.
OpCatalog build_op_catalog(const std::string& library_path);

}  // namespace tprof::symbolizer
