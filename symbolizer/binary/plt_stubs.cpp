#include "symbolizer/binary/plt_stubs.h"

#include <algorithm>
#include <cstring>

namespace tprof::symbolizer {
namespace {

// `jmp *disp32(%rip)`: every PLT entry flavour has exactly one, after an optional endbr64
// (IBT) and bnd prefix (MPX); the lazy-binding entries follow it with push/jmp to PLT0.
constexpr unsigned char kJumpThroughSlot[] = {0xff, 0x25};
constexpr size_t kJumpLength = 6;

bool is_plt_section(std::string_view name) {
  return name == ".plt" || name == ".plt.sec" || name == ".plt.got";
}

}  // namespace

std::vector<uint64_t> plt_stubs_for(const ElfFile& elf, const Relocations& relocations,
                                    const std::vector<std::string_view>& symbol_names) {
  std::vector<uint64_t> stubs;
  elf.for_each_section([&](const ElfSection& section) {
    if (!is_plt_section(section.name) || section.header.sh_entsize == 0) return;
    const std::string_view bytes = elf.section_bytes(section);
    const size_t entry_size = section.header.sh_entsize;
    for (size_t entry = 0; entry + entry_size <= bytes.size(); entry += entry_size) {
      const std::string_view code = bytes.substr(entry, entry_size);
      const size_t jump = code.find(std::string_view(
          reinterpret_cast<const char*>(kJumpThroughSlot), sizeof(kJumpThroughSlot)));
      if (jump == std::string_view::npos || jump + kJumpLength > code.size()) continue;
      int32_t displacement = 0;
      std::memcpy(&displacement, code.data() + jump + sizeof(kJumpThroughSlot),
                  sizeof(displacement));
      const uint64_t stub = section.header.sh_addr + entry;
      const uint64_t slot = stub + jump + kJumpLength + static_cast<int64_t>(displacement);
      const std::optional<RelocatedPointer> target = relocations.pointer_at(slot);
      if (!target) continue;
      if (std::find(symbol_names.begin(), symbol_names.end(), target->symbol) !=
          symbol_names.end()) {
        stubs.push_back(stub);
      }
    }
  });
  return stubs;
}

}  // namespace tprof::symbolizer
