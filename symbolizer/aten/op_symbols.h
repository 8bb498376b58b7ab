// The at::_ops::<op>::call entry points an ELF file defines.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/aten/op_catalog.h"

namespace tprof::symbolizer {

// "add_Tensor" for "_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE"; nullopt for
// any other symbol (redispatch, other namespaces, malformed lengths). Reads the length-prefixed
// nested name directly: demangling would cost more and say nothing extra.
std::optional<std::string_view> op_name_of_call_symbol(std::string_view mangled);

// Every defined function symbol at::_ops::<op>::call in .dynsym and .symtab, each once (a
// symbol listed in both tables is the same function), sorted by unambiguous_name.
std::vector<OpCallSite> find_op_call_sites(const ElfFile& elf);

}  // namespace tprof::symbolizer
