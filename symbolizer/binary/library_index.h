// One library's sections, defined symbols and dynamic relocations, read once and shared by the
// symbolizers that read its code (record_function and autograd sites, the sequence counter,
// vtable names): each table of libtorch_cpu takes tens of milliseconds to build.
#pragma once

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/relocations.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

struct LibraryIndex {
  // `elf` must outlive the index.
  explicit LibraryIndex(const ElfFile& elf) : elf(elf), sections(elf), symbols(elf), relocations(elf) {}
  LibraryIndex(const LibraryIndex&) = delete;
  LibraryIndex& operator=(const LibraryIndex&) = delete;

  const ElfFile& elf;
  const SectionMap sections;
  const DefinedSymbols symbols;
  const Relocations relocations;
};

}  // namespace tprof::symbolizer
