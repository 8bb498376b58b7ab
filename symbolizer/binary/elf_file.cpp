#include "symbolizer/binary/elf_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tprof::symbolizer {
namespace {

int open_read_only(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  }
  return fd;
}

// libelf refuses every call until the caller has declared the ELF version it understands.
void initialize_libelf(const std::string& path) {
  static const bool supported = elf_version(EV_CURRENT) != EV_NONE;
  if (!supported) {
    throw std::runtime_error("cannot read " + path + ": libelf does not support EV_CURRENT");
  }
}

}  // namespace

ElfFile::FileDescriptor::~FileDescriptor() { close(fd_); }

ElfFile::ElfFile(const std::string& path) : path_(path), fd_(open_read_only(path)) {
  initialize_libelf(path_);
  // READ_MMAP: section data are views into the mapped file, so scanning a 40 MB .rodata
  // copies nothing.
  elf_.reset(elf_begin(fd_.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf_) fail("elf_begin");
  if (elf_kind(elf_.get()) != ELF_K_ELF) {
    throw std::runtime_error(path_ + " is not an ELF file");
  }
  if (elf_getshdrstrndx(elf_.get(), &section_names_index_) != 0) fail("elf_getshdrstrndx");
}

ElfFile::~ElfFile() = default;

void ElfFile::fail(std::string_view what) const {
  throw std::runtime_error("cannot read ELF " + path_ + ": " + std::string(what) + ": " +
                           elf_errmsg(-1));
}

ElfSection ElfFile::describe(Elf_Scn* section) const {
  ElfSection described;
  described.handle = section;
  if (gelf_getshdr(section, &described.header) == nullptr) fail("gelf_getshdr");
  if (const char* name = elf_strptr(elf_.get(), section_names_index_, described.header.sh_name)) {
    described.name = name;
  }
  return described;
}

void ElfFile::for_each_section(const std::function<void(const ElfSection&)>& visit) const {
  for (Elf_Scn* section = elf_nextscn(elf_.get(), nullptr); section != nullptr;
       section = elf_nextscn(elf_.get(), section)) {
    visit(describe(section));
  }
}

ElfSection ElfFile::section_at(size_t index) const {
  Elf_Scn* section = elf_getscn(elf_.get(), index);
  if (section == nullptr) fail("no section " + std::to_string(index));
  return describe(section);
}

std::string_view ElfFile::section_bytes(const ElfSection& section) const {
  if (section.header.sh_type == SHT_NOBITS) return {};
  Elf_Data* data = elf_rawdata(section.handle, nullptr);
  if (data == nullptr || data->d_buf == nullptr) return {};
  return {static_cast<const char*>(data->d_buf), data->d_size};
}

void ElfFile::for_each_symbol(const ElfSection& symbol_table,
                              const std::function<void(const ElfSymbol&)>& visit) const {
  Elf_Data* data = elf_getdata(symbol_table.handle, nullptr);
  if (data == nullptr || symbol_table.header.sh_entsize == 0) return;
  const size_t count = symbol_table.header.sh_size / symbol_table.header.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    ElfSymbol entry;
    if (gelf_getsym(data, static_cast<int>(i), &entry.symbol) == nullptr) fail("gelf_getsym");
    if (const char* name = elf_strptr(elf_.get(), symbol_table.header.sh_link,
                                      entry.symbol.st_name)) {
      entry.name = name;
    }
    visit(entry);
  }
}

}  // namespace tprof::symbolizer
