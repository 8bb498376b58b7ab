// What tells one build of an ELF file from another without reading its tables: the GNU build-id
// the linker wrote (a note found through the program headers), the file's size and mtime, and a
// digest of its ELF and section headers. A few small reads: the plan cache keys libtorch_cpu's
// plans on it, and tprof's own build on its executable's.
#pragma once

#include <cstdint>
#include <string>

namespace tprof::symbolizer {

struct ElfIdentity {
  std::string build_id;        // the NT_GNU_BUILD_ID note's bytes; empty when the file has none
  uint64_t size = 0;           // bytes
  int64_t mtime_ns = 0;        // of the last change of its contents
  uint64_t layout_digest = 0;  // of the ELF header and section header table: patchelf keeps the
                               // build-id of a file it rewrites, not its layout

  bool operator==(const ElfIdentity&) const = default;
};

// Throws std::runtime_error (one line, naming the path) when `path` cannot be read or is not a
// 64-bit little-endian ELF file.
ElfIdentity read_elf_identity(const std::string& path);

}  // namespace tprof::symbolizer
