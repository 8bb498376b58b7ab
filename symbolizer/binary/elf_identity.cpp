#include "symbolizer/binary/elf_identity.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace tprof::symbolizer {
namespace {

// Bounds on what a header may ask to be read: far above any real file's, far below harm.
constexpr uint64_t kMaxProgramHeaderBytes = 64 << 10;
constexpr uint64_t kMaxNoteBytes = 64 << 10;
constexpr uint64_t kMaxSectionHeaderBytes = 4 << 20;
constexpr char kGnu[] = "GNU";

class ReadOnlyFile {
 public:
  explicit ReadOnlyFile(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) fail(std::string("cannot open: ") + std::strerror(errno));
  }
  ~ReadOnlyFile() { ::close(fd_); }
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;

  struct stat status() const {
    struct stat status{};
    if (::fstat(fd_, &status) != 0) fail(std::string("cannot stat: ") + std::strerror(errno));
    return status;
  }

  // Exactly `size` bytes at `offset`: a file shorter than its headers say is no ELF file to trust.
  std::string read_at(uint64_t offset, uint64_t size) const {
    std::string bytes(size, '\0');
    for (uint64_t done = 0; done < size;) {
      const ssize_t read = ::pread(fd_, bytes.data() + done, size - done, static_cast<off_t>(offset + done));
      if (read < 0 && errno == EINTR) continue;
      if (read <= 0) fail("cannot read " + std::to_string(size) + " bytes at offset " + std::to_string(offset));
      done += static_cast<uint64_t>(read);
    }
    return bytes;
  }

  [[noreturn]] void fail(const std::string& what) const { throw std::runtime_error(path_ + ": " + what); }

 private:
  std::string path_;
  int fd_;
};

template <typename T>
T load_at(std::string_view bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

uint64_t fnv1a(std::string_view bytes, uint64_t hash = 0xcbf29ce484222325ULL) {
  for (const unsigned char byte : bytes) hash = (hash ^ byte) * 0x100000001b3ULL;
  return hash;
}

uint64_t align_up(uint64_t value, uint64_t alignment) { return (value + alignment - 1) / alignment * alignment; }

// The descriptor of the NT_GNU_BUILD_ID note among `notes` (a PT_NOTE segment's entries, each
// padded to `alignment`); empty when none is there.
std::string build_id_in(std::string_view notes, uint64_t alignment) {
  for (uint64_t at = 0; at + sizeof(Elf64_Nhdr) <= notes.size();) {
    const auto note = load_at<Elf64_Nhdr>(notes, at);
    const uint64_t name_at = at + sizeof(Elf64_Nhdr);
    const uint64_t descriptor_at = name_at + align_up(note.n_namesz, alignment);
    if (descriptor_at + note.n_descsz > notes.size()) break;
    if (note.n_type == NT_GNU_BUILD_ID && note.n_namesz == sizeof(kGnu) &&
        notes.substr(name_at, sizeof(kGnu)) == std::string_view(kGnu, sizeof(kGnu)))
      return std::string(notes.substr(descriptor_at, note.n_descsz));
    at = descriptor_at + align_up(note.n_descsz, alignment);
  }
  return "";
}

std::string build_id_of(const ReadOnlyFile& file, const Elf64_Ehdr& header) {
  const uint64_t table_bytes = uint64_t{header.e_phnum} * header.e_phentsize;
  if (header.e_phnum == 0) return "";
  if (header.e_phentsize != sizeof(Elf64_Phdr) || table_bytes > kMaxProgramHeaderBytes)
    file.fail("implausible program header table");
  const std::string table = file.read_at(header.e_phoff, table_bytes);
  for (uint64_t at = 0; at < table_bytes; at += sizeof(Elf64_Phdr)) {
    const auto segment = load_at<Elf64_Phdr>(table, at);
    if (segment.p_type != PT_NOTE || segment.p_filesz > kMaxNoteBytes) continue;
    const std::string found =
        build_id_in(file.read_at(segment.p_offset, segment.p_filesz), segment.p_align == 8 ? 8 : 4);
    if (!found.empty()) return found;
  }
  return "";
}

}  // namespace

ElfIdentity read_elf_identity(const std::string& path) {
  const ReadOnlyFile file(path);
  const struct stat status = file.status();
  const std::string header_bytes = file.read_at(0, sizeof(Elf64_Ehdr));
  const auto header = load_at<Elf64_Ehdr>(header_bytes, 0);
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB)
    file.fail("not a 64-bit little-endian ELF file");
  const uint64_t section_table_bytes = uint64_t{header.e_shnum} * header.e_shentsize;
  if (section_table_bytes > kMaxSectionHeaderBytes) file.fail("implausible section header table");

  ElfIdentity identity;
  identity.build_id = build_id_of(file, header);
  identity.size = static_cast<uint64_t>(status.st_size);
  identity.mtime_ns = status.st_mtim.tv_sec * 1'000'000'000LL + status.st_mtim.tv_nsec;
  identity.layout_digest = fnv1a(file.read_at(header.e_shoff, section_table_bytes), fnv1a(header_bytes));
  return identity;
}

}  // namespace tprof::symbolizer
