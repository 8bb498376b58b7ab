#include "import_redirect.h"

#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace tprof::cupti {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobalData = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobalData = R_AARCH64_GLOB_DAT;
#else
constexpr uint32_t kJumpSlot = UINT32_MAX;  // no redirect on other architectures
constexpr uint32_t kGlobalData = UINT32_MAX;
#endif

struct Request {
  std::span<const ImportRedirect> redirects;
  std::span<const void* const> skip;
  int redirected = 0;
};

// The dynamic tables an object's relocations are read from.
struct DynamicTables {
  const ElfW(Sym)* symbols = nullptr;
  const char* strings = nullptr;
  const ElfW(Rela)* plt = nullptr;  // DT_JMPREL: PLT slots
  size_t plt_bytes = 0;
  const ElfW(Rela)* data = nullptr;  // DT_RELA: GOT slots among the rest
  size_t data_bytes = 0;
};

// glibc stores these entries already relocated on x86-64 and arm64; a loader that does not
// leaves them as link-time addresses, below the load base.
template <typename Pointer>
Pointer at(ElfW(Addr) base, ElfW(Addr) value) {
  return reinterpret_cast<Pointer>(value < base ? base + value : value);
}

bool read_tables(const dl_phdr_info& info, DynamicTables& tables) {
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    if (info.dlpi_phdr[i].p_type == PT_DYNAMIC)
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(info.dlpi_addr + info.dlpi_phdr[i].p_vaddr);
  }
  if (dynamic == nullptr) return false;
  bool plt_is_rela = true;
  for (const ElfW(Dyn)* entry = dynamic; entry->d_tag != DT_NULL; ++entry) {
    const ElfW(Addr) base = info.dlpi_addr;
    switch (entry->d_tag) {
      case DT_SYMTAB: tables.symbols = at<const ElfW(Sym)*>(base, entry->d_un.d_ptr); break;
      case DT_STRTAB: tables.strings = at<const char*>(base, entry->d_un.d_ptr); break;
      case DT_JMPREL: tables.plt = at<const ElfW(Rela)*>(base, entry->d_un.d_ptr); break;
      case DT_PLTRELSZ: tables.plt_bytes = entry->d_un.d_val; break;
      case DT_PLTREL: plt_is_rela = entry->d_un.d_val == DT_RELA; break;
      case DT_RELA: tables.data = at<const ElfW(Rela)*>(base, entry->d_un.d_ptr); break;
      case DT_RELASZ: tables.data_bytes = entry->d_un.d_val; break;
      default: break;
    }
  }
  if (!plt_is_rela) tables.plt_bytes = 0;  // REL-format PLTs are not used on these architectures
  return tables.symbols != nullptr && tables.strings != nullptr;
}

// Whether `address` lies in a segment of `type` (PT_LOAD: the object's; PT_GNU_RELRO: made
// read-only after relocation).
bool in_segment(const dl_phdr_info& info, ElfW(Word) type, const void* address) {
  const auto value = reinterpret_cast<ElfW(Addr)>(address);
  for (int i = 0; i < info.dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info.dlpi_phdr[i];
    const ElfW(Addr) start = info.dlpi_addr + segment.p_vaddr;
    if (segment.p_type == type && value >= start && value < start + segment.p_memsz) return true;
  }
  return false;
}

// One aligned pointer store, so that a thread calling through the slot meanwhile reads the old
// function or the new one, never half of each.
bool write_slot(const dl_phdr_info& info, void** slot, void* value) {
  if (!in_segment(info, PT_GNU_RELRO, slot)) {
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    return true;
  }
  const auto page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* page = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(slot) & ~(page_size - 1));
  if (mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  mprotect(page, page_size, PROT_READ);
  return true;
}

void redirect_in(const dl_phdr_info& info, const ElfW(Rela)* relocations, size_t bytes, const DynamicTables& tables,
                 Request& request) {
  if (relocations == nullptr) return;
  for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela)& relocation = relocations[i];
    const auto type = static_cast<uint32_t>(ELF64_R_TYPE(relocation.r_info));
    if (type != kJumpSlot && type != kGlobalData) continue;
    const char* name = tables.strings + tables.symbols[ELF64_R_SYM(relocation.r_info)].st_name;
    for (const ImportRedirect& redirect : request.redirects) {
      if (std::strcmp(name, redirect.symbol) != 0) continue;
      auto** slot = reinterpret_cast<void**>(info.dlpi_addr + relocation.r_offset);
      if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) != redirect.replacement &&
          write_slot(info, slot, redirect.replacement))
        ++request.redirected;
    }
  }
}

int visit_object(dl_phdr_info* info, size_t, void* data) {
  auto& request = *static_cast<Request*>(data);
  for (const void* address : request.skip) {
    if (in_segment(*info, PT_LOAD, address)) return 0;
  }
  DynamicTables tables;
  if (!read_tables(*info, tables)) return 0;
  redirect_in(*info, tables.plt, tables.plt_bytes, tables, request);
  redirect_in(*info, tables.data, tables.data_bytes, tables, request);
  return 0;
}

}  // namespace

int redirect_imports(std::span<const ImportRedirect> redirects, std::span<const void* const> skip) {
  Request request{redirects, skip};
  dl_iterate_phdr(visit_object, &request);
  return request.redirected;
}

bool loaded_objects_changed() {
  static unsigned long long last_adds = 0, last_subs = 0;
  struct Census {
    unsigned long long adds = 0, subs = 0;
  } census;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t size, void* data) {
        auto& out = *static_cast<Census*>(data);
        if (size >= offsetof(dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs)) {
          out.adds = info->dlpi_adds;
          out.subs = info->dlpi_subs;
        }
        return 1;  // the counts are the same in every object's entry: the first is enough
      },
      &census);
  const bool changed = census.adds != last_adds || census.subs != last_subs;
  last_adds = census.adds;
  last_subs = census.subs;
  return changed;
}

}  // namespace tprof::cupti
