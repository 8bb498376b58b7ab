#include "symbolizer/python/python_runtime.h"

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/field_accessor_decoder.h"
#include "symbolizer/binary/hex_text.h"
#include "symbolizer/binary/process_memory.h"
#include "symbolizer/python/python_offsets.h"

namespace tprof::symbolizer {
namespace {

// Raised for every reason discovery gives up; discover_python turns it into why_not.
struct NotDiscoverable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr int kSupportedMajor = 3;

std::string supported_range() {
  return "3." + std::to_string(kFirstTableMinor) + "–3." + std::to_string(kLastDebugOffsetsMinor);
}

// ---- the process's mappings ------------------------------------------------------------------

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t file_offset = 0;
  ino_t inode = 0;
  std::string path;  // as seen from our root
};

// The mapping's entry in /proc/PID/map_files. Its name has no zero padding, unlike the
// range in maps ("400000-420000", where maps says "00400000-00420000").
std::string map_files_name(const Mapping& mapping) {
  std::ostringstream name;
  name << std::hex << mapping.start << '-' << mapping.end;
  return name.str();
}

std::vector<Mapping> read_file_mappings(pid_t pid) {
  const std::string maps_path = "/proc/" + std::to_string(pid) + "/maps";
  std::ifstream maps(maps_path);
  if (!maps) {
    throw NotDiscoverable("cannot read " + maps_path + ": " + std::strerror(errno) +
                          " (is process " + std::to_string(pid) + " running?)");
  }
  std::vector<Mapping> mappings;
  std::string line;
  while (std::getline(maps, line)) {
    // address perms offset dev inode pathname
    std::istringstream fields(line);
    Mapping mapping;
    std::string range, perms, offset, device;
    fields >> range >> perms >> offset >> device >> mapping.inode;
    std::getline(fields >> std::ws, mapping.path);
    if (mapping.path.empty() || mapping.path[0] != '/') continue;
    const size_t dash = range.find('-');
    mapping.start = std::stoull(range.substr(0, dash), nullptr, 16);
    mapping.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    mapping.file_offset = std::stoull(offset, nullptr, 16);
    mappings.push_back(std::move(mapping));
  }
  return mappings;
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// (major, minor) from "libpython3.10.so.1.0", "libpython3.13t.so" or "python3.9"; the name must
// start with `prefix` followed directly by the version.
std::optional<std::pair<int, int>> version_in_file_name(std::string_view name,
                                                        std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  int major = 0, minor = 0;
  auto [major_end, major_error] = std::from_chars(name.data(), name.data() + name.size(), major);
  if (major_error != std::errc{} || major_end == name.data() + name.size() || *major_end != '.') {
    return std::nullopt;
  }
  const char* minor_begin = major_end + 1;
  auto [minor_end, minor_error] = std::from_chars(minor_begin, name.data() + name.size(), minor);
  if (minor_error != std::errc{}) return std::nullopt;
  // What may follow: nothing (python3.9), ".so..." or an ABI flag ("t", "d", "m") and then
  // ".so...". Anything else (python3.9-config) is not the interpreter.
  std::string_view rest(minor_end, name.data() + name.size() - minor_end);
  while (!rest.empty() && std::islower(static_cast<unsigned char>(rest.front())))
    rest.remove_prefix(1);
  if (!rest.empty() && !rest.starts_with(".so")) return std::nullopt;
  return std::pair{major, minor};
}

std::optional<std::pair<int, int>> version_in_interpreter_name(const std::string& path) {
  const std::string name = base_name(path);
  if (auto version = version_in_file_name(name, "libpython")) return version;
  return version_in_file_name(name, "python");
}

// The ELF a mapping came from, as the process sees it.
struct MappedImage {
  std::string path;           // the mapped path, as /proc/PID/maps shows it
  std::string openable_path;  // a path we can open that is the very same file
  uint64_t load_address = 0;  // start of its mapping with file offset 0
};

// Same rule as TargetProcess::find_mapped_library: maps shows paths from *our* root. For a
// target in another mount namespace (a container) that is its own path, reachable through
// /proc/PID/root; for a chrooted target it is already our path. The mapping's map_files entry
// always works but is a magic link. Take the first candidate that is the very file mapped.
// (Unlike find_mapped_library, the map_files name is rebuilt without maps' zero padding, or
// an ET_EXEC interpreter mapped at 0x400000 would never be found there.)
MappedImage open_mapped_image(pid_t pid, const std::vector<Mapping>& mappings,
                              const Mapping& any_mapping) {
  const Mapping* first = nullptr;
  for (const Mapping& mapping : mappings) {
    if (mapping.inode == any_mapping.inode && mapping.path == any_mapping.path &&
        mapping.file_offset == 0) {
      first = &mapping;
      break;
    }
  }
  if (first == nullptr) {
    throw NotDiscoverable(any_mapping.path +
                          " has no mapping of its start (file offset 0) in process " +
                          std::to_string(pid));
  }
  const std::string proc_dir = "/proc/" + std::to_string(pid);
  for (const std::string& candidate : {proc_dir + "/root" + first->path, first->path,
                                       proc_dir + "/map_files/" + map_files_name(*first)}) {
    struct stat status {};
    if (::stat(candidate.c_str(), &status) == 0 && status.st_ino == first->inode) {
      return MappedImage{first->path, candidate, first->start};
    }
  }
  throw NotDiscoverable("cannot open " + first->path + " of process " + std::to_string(pid) +
                        " (through /proc/PID/root or /proc/PID/map_files)");
}

// The mapped libpython if there is one, else the main executable.
MappedImage find_interpreter_image(pid_t pid) {
  const std::vector<Mapping> mappings = read_file_mappings(pid);
  for (const Mapping& mapping : mappings) {
    if (version_in_file_name(base_name(mapping.path), "libpython")) {
      return open_mapped_image(pid, mappings, mapping);
    }
  }
  const std::string exe_link = "/proc/" + std::to_string(pid) + "/exe";
  struct stat executable {};
  if (::stat(exe_link.c_str(), &executable) != 0) {
    throw NotDiscoverable("cannot inspect " + exe_link + ": " + std::strerror(errno));
  }
  for (const Mapping& mapping : mappings) {
    if (mapping.inode == executable.st_ino) return open_mapped_image(pid, mappings, mapping);
  }
  throw NotDiscoverable("the executable of process " + std::to_string(pid) +
                        " is not among its mappings");
}

// ---- the interpreter's ELF -------------------------------------------------------------------

// What the ELF header and program headers say about where the file lands in memory; libelf's
// ElfFile wrapper shows sections only.
struct LoadLayout {
  bool position_independent = false;   // ET_DYN: loaded at an address chosen at run time
  uint64_t first_segment_address = 0;  // p_vaddr of the lowest PT_LOAD, page-aligned
};

LoadLayout read_load_layout(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  Elf64_Ehdr header{};
  if (!file.read(reinterpret_cast<char*>(&header), sizeof(header)) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
    throw NotDiscoverable("cannot read the ELF header of " + path);
  }
  if (header.e_ident[EI_CLASS] != ELFCLASS64 || header.e_machine != EM_X86_64) {
    throw NotDiscoverable(path + " is not an x86-64 ELF; only x86-64 interpreters are supported");
  }
  LoadLayout layout;
  layout.position_independent = header.e_type == ET_DYN;
  bool found_load = false;
  uint64_t lowest = 0;
  for (unsigned index = 0; index < header.e_phnum; ++index) {
    Elf64_Phdr segment{};
    file.seekg(static_cast<std::streamoff>(header.e_phoff + index * sizeof(Elf64_Phdr)));
    if (!file.read(reinterpret_cast<char*>(&segment), sizeof(segment))) {
      throw NotDiscoverable("cannot read the program headers of " + path);
    }
    if (segment.p_type != PT_LOAD) continue;
    if (!found_load || segment.p_vaddr < lowest) lowest = segment.p_vaddr;
    found_load = true;
  }
  if (!found_load) throw NotDiscoverable(path + " has no loadable segment");
  const uint64_t page_size = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  layout.first_segment_address = lowest & ~(page_size - 1);
  return layout;
}

// The symbols discovery needs, by name. .dynsym comes first: every one of them is exported,
// and a .symtab (when not stripped) only repeats them.
std::map<std::string, GElf_Sym, std::less<>> find_symbols(const ElfFile& elf,
                                                          const std::set<std::string_view>& names) {
  std::map<std::string, GElf_Sym, std::less<>> found;
  for (const unsigned table_type : {SHT_DYNSYM, SHT_SYMTAB}) {
    elf.for_each_section([&](const ElfSection& table) {
      if (table.header.sh_type != table_type) return;
      elf.for_each_symbol(table, [&](const ElfSymbol& entry) {
        if (entry.symbol.st_shndx == SHN_UNDEF || !names.contains(entry.name)) return;
        found.emplace(std::string(entry.name), entry.symbol);
      });
    });
  }
  return found;
}

std::optional<ElfSection> find_section(const ElfFile& elf, std::string_view name) {
  std::optional<ElfSection> found;
  elf.for_each_section([&](const ElfSection& section) {
    if (!found && section.name == name) found = section;
  });
  return found;
}

// The file's bytes for `size` bytes at address `address` of section `section_index`.
std::optional<std::string_view> file_bytes(const ElfFile& elf, size_t section_index,
                                           uint64_t address, size_t size) {
  if (section_index == SHN_UNDEF || section_index >= SHN_LORESERVE) return std::nullopt;
  const ElfSection section = elf.section_at(section_index);
  const std::string_view bytes = elf.section_bytes(section);
  if (address < section.header.sh_addr || address - section.header.sh_addr + size > bytes.size()) {
    return std::nullopt;
  }
  return bytes.substr(address - section.header.sh_addr, size);
}

// ---- the version -----------------------------------------------------------------------------

// PY_VERSION_HEX from the exported constant Py_Version (3.11+), read from the file: it is
// const data, so the file holds what the process sees.
std::optional<PythonVersion> version_from_py_version(const ElfFile& elf, const GElf_Sym& symbol) {
  auto bytes = file_bytes(elf, symbol.st_shndx, symbol.st_value, sizeof(uint64_t));
  if (!bytes) return std::nullopt;
  uint64_t hex_version = 0;
  std::memcpy(&hex_version, bytes->data(), sizeof(hex_version));
  return PythonVersion{.major = static_cast<int>((hex_version >> 24) & 0xff),
                       .minor = static_cast<int>((hex_version >> 16) & 0xff),
                       .micro = static_cast<int>((hex_version >> 8) & 0xff)};
}

// Before 3.11 the micro version exists only as the PY_VERSION literal ("3.10.13") that
// Py_GetVersion formats. The linker may merge it into the tail of a longer string (pyenv's
// "/root/.pyenv/versions/3.10.13" holds it), so look for "3.<minor>.<digits>" ending a string,
// not preceded by a digit or dot, and trust it only if all such strings agree.
std::optional<int> micro_from_version_literal(const ElfFile& elf, int major, int minor) {
  const std::optional<ElfSection> rodata = find_section(elf, ".rodata");
  if (!rodata) return std::nullopt;
  const std::string_view bytes = elf.section_bytes(*rodata);
  const std::string prefix = std::to_string(major) + "." + std::to_string(minor) + ".";
  std::set<int> micros;
  for (size_t at = bytes.find(prefix); at != std::string_view::npos;
       at = bytes.find(prefix, at + 1)) {
    if (at > 0 &&
        (std::isdigit(static_cast<unsigned char>(bytes[at - 1])) || bytes[at - 1] == '.')) {
      continue;
    }
    const size_t digits_begin = at + prefix.size();
    size_t digits_end = digits_begin;
    while (digits_end < bytes.size() &&
           std::isdigit(static_cast<unsigned char>(bytes[digits_end]))) {
      ++digits_end;
    }
    if (digits_end == digits_begin) continue;
    // A release-level suffix may follow: "3.10.0rc2", "3.9.18+".
    size_t end = digits_end;
    while (end < bytes.size() &&
           (std::isalnum(static_cast<unsigned char>(bytes[end])) || bytes[end] == '+')) {
      ++end;
    }
    if (end >= bytes.size() || bytes[end] != '\0') continue;
    int micro = 0;
    std::from_chars(bytes.data() + digits_begin, bytes.data() + digits_end, micro);
    micros.insert(micro);
  }
  if (micros.size() != 1) return std::nullopt;
  return *micros.begin();
}

bool is_supported(const PythonVersion& version) {
  return version.major == kSupportedMajor && version.minor >= kFirstTableMinor &&
         version.minor <= kLastDebugOffsetsMinor;
}

std::string unsupported_message(const PythonVersion& version) {
  return "Python " + std::to_string(version.major) + "." + std::to_string(version.minor) +
         " is not supported (" + supported_range() + " are)";
}

// ---- offsets decoded from machine code -------------------------------------------------------

struct DecodedOffset {
  const char* function;  // the exported accessor
  bool reads_global;     // it returns a field of _PyRuntime, not of its argument
  uint32_t PythonLayout::*field;
  const char* field_name;
};

constexpr DecodedOffset kDecodedOffsets[] = {
    {"PyInterpreterState_Head", true, &PythonLayout::runtime_interpreters_head,
     "runtime_interpreters_head"},
    {"PyInterpreterState_Next", false, &PythonLayout::interpreter_next, "interpreter_next"},
    {"PyInterpreterState_ThreadHead", false, &PythonLayout::interpreter_threads_head,
     "interpreter_threads_head"},
    {"PyThreadState_Next", false, &PythonLayout::thread_next, "thread_next"},
};

// Replaces the table's thread-list offsets with the ones the accessors' code uses. The table
// value stays, with a warning, where an accessor cannot be decoded.
void apply_decoded_offsets(const ElfFile& elf,
                           const std::map<std::string, GElf_Sym, std::less<>>& symbols,
                           uint64_t runtime_address, uint64_t runtime_size, PythonLayout& layout) {
  const FieldAccessorDecoder decoder(elf, runtime_address, runtime_size);
  const char* table_name = layout.from_debug_offsets ? "_Py_DebugOffsets" : "built-in table";
  for (const DecodedOffset& decoded : kDecodedOffsets) {
    uint32_t& value = layout.*decoded.field;
    std::string why_not;
    std::optional<uint64_t> offset;
    if (auto symbol = symbols.find(decoded.function); symbol == symbols.end()) {
      why_not = "it is not exported";
    } else if (decoded.reads_global) {
      offset = decoder.global_field_returned_by(symbol->second.st_value, &why_not);
    } else {
      offset = decoder.argument_field_returned_by(symbol->second.st_value, &why_not);
    }
    if (!offset) {
      layout.warnings.push_back(std::string("cannot decode ") + decoded.function + " (" + why_not +
                                "); " + decoded.field_name + " = " + std::to_string(value) +
                                " from the " + table_name);
      continue;
    }
    if (*offset != value) {
      layout.warnings.push_back(std::string(decoded.function) + " reads offset " +
                                std::to_string(*offset) + " but the " + table_name + " says " +
                                decoded.field_name + " = " + std::to_string(value) +
                                "; using the decoded " + std::to_string(*offset));
      value = static_cast<uint32_t>(*offset);
    }
  }
}

// ---- putting it together ---------------------------------------------------------------------

constexpr std::string_view kRuntimeSymbol = "_PyRuntime";
constexpr std::string_view kRuntimeSection = ".PyRuntime";  // 3.14+, for stripped builds
constexpr std::string_view kVersionSymbol = "Py_Version";
constexpr std::string_view kCodeTypeSymbol = "PyCode_Type";

PythonLayout discover(pid_t pid) {
  const MappedImage image = find_interpreter_image(pid);
  const ElfFile elf(image.openable_path);

  std::set<std::string_view> wanted = {kRuntimeSymbol, kVersionSymbol, kCodeTypeSymbol};
  for (const DecodedOffset& decoded : kDecodedOffsets) wanted.insert(decoded.function);
  const auto symbols = find_symbols(elf, wanted);

  PythonLayout layout;
  layout.interpreter_path = image.path;

  // The version first: it decides whether there is anything more to do.
  std::optional<PythonVersion> version;
  if (auto symbol = symbols.find(kVersionSymbol); symbol != symbols.end()) {
    version = version_from_py_version(elf, symbol->second);
  }
  if (!version) {
    if (auto named = version_in_interpreter_name(image.path)) {
      version = PythonVersion{.major = named->first, .minor = named->second};
    }
  }

  uint64_t runtime_file_address = 0;
  uint64_t runtime_size = 0;
  if (auto symbol = symbols.find(kRuntimeSymbol); symbol != symbols.end()) {
    runtime_file_address = symbol->second.st_value;
    runtime_size = symbol->second.st_size;
  } else if (auto section = find_section(elf, kRuntimeSection)) {
    runtime_file_address = section->header.sh_addr;
    runtime_size = section->header.sh_size;
  } else {
    if (version && !is_supported(*version)) throw NotDiscoverable(unsupported_message(*version));
    throw NotDiscoverable("no CPython interpreter in process " + std::to_string(pid) +
                          ": no libpython is mapped and " + image.path +
                          " does not export _PyRuntime");
  }
  if (!version) {
    throw NotDiscoverable("cannot tell the Python version of " + image.path +
                          ": no Py_Version symbol and no version in its name");
  }
  if (!is_supported(*version)) throw NotDiscoverable(unsupported_message(*version));
  layout.version = *version;
  if (layout.version.minor <= 10) {
    if (auto micro = micro_from_version_literal(elf, layout.version.major, layout.version.minor)) {
      layout.version.micro = *micro;
    } else {
      layout.warnings.push_back(
          "micro version unknown (no single \"" + std::to_string(layout.version.major) + "." +
          std::to_string(layout.version.minor) + ".N\" string in .rodata); reported as 0");
    }
  }

  const LoadLayout load = read_load_layout(image.openable_path);
  const uint64_t bias =
      load.position_independent ? image.load_address - load.first_segment_address : 0;
  layout.runtime_address = bias + runtime_file_address;

  if (layout.version.minor <= kLastTableMinor) {
    apply_builtin_offsets(layout);
  } else {
    std::string debug_offsets(debug_offsets_size(layout.version.minor), '\0');
    if (!ProcessMemory(pid).read(layout.runtime_address, debug_offsets.data(),
                                 debug_offsets.size())) {
      throw NotDiscoverable("cannot read _PyRuntime at " + hex(layout.runtime_address) +
                            " in process " + std::to_string(pid) + ": " + std::strerror(errno));
    }
    std::string why_not;
    if (!apply_debug_offsets(debug_offsets, layout, &why_not)) throw NotDiscoverable(why_not);
  }

  apply_decoded_offsets(elf, symbols, runtime_file_address, runtime_size, layout);

  auto code_type = symbols.find(kCodeTypeSymbol);
  if (code_type == symbols.end()) {
    throw NotDiscoverable(image.path + " does not export PyCode_Type");
  }
  layout.code_type_address = bias + code_type->second.st_value;
  return layout;
}

}  // namespace

std::optional<PythonLayout> discover_python(pid_t pid, std::string* why_not) {
  try {
    return discover(pid);
  } catch (const std::exception& error) {
    // NotDiscoverable, and ElfFile's std::runtime_error for a file that is not a readable ELF.
    if (why_not) *why_not = error.what();
    return std::nullopt;
  }
}

}  // namespace tprof::symbolizer
