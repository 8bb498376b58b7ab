// A read-only ELF file opened through libelf, owning both the descriptor and the Elf handle.
#pragma once

#include <gelf.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace tprof::symbolizer {

struct ElfSection {
  Elf_Scn* handle = nullptr;
  std::string_view name;  // ".rodata"; points into the file's section-name table
  GElf_Shdr header{};
};

struct ElfSymbol {
  std::string_view name;  // points into the symbol table's string table
  GElf_Sym symbol{};
};

class ElfFile {
 public:
  // Throws std::runtime_error (one line, naming the path) if the file cannot be opened or
  // is not an ELF object.
  explicit ElfFile(const std::string& path);
  ~ElfFile();
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  const std::string& path() const { return path_; }

  void for_each_section(const std::function<void(const ElfSection&)>& visit) const;

  // The section with index `index` (a symbol's st_shndx); throws if there is none.
  ElfSection section_at(size_t index) const;

  // The section's bytes as stored in the file (empty for SHT_NOBITS). The view stays valid
  // for the lifetime of this ElfFile: libelf maps the file and hands out pointers into it.
  std::string_view section_bytes(const ElfSection& section) const;

  // Every entry of a SHT_SYMTAB or SHT_DYNSYM section, index 0 (the null symbol) included.
  void for_each_symbol(const ElfSection& symbol_table,
                       const std::function<void(const ElfSymbol&)>& visit) const;

 private:
  struct ElfEnd {
    void operator()(Elf* elf) const { elf_end(elf); }
  };

  // Closes on destruction; declared before elf_ so that elf_end runs before close.
  class FileDescriptor {
   public:
    explicit FileDescriptor(int fd) : fd_(fd) {}
    ~FileDescriptor();
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    int get() const { return fd_; }

   private:
    int fd_;
  };

  ElfSection describe(Elf_Scn* section) const;
  [[noreturn]] void fail(std::string_view what) const;

  std::string path_;
  FileDescriptor fd_;
  std::unique_ptr<Elf, ElfEnd> elf_;
  size_t section_names_index_ = 0;
};

}  // namespace tprof::symbolizer
