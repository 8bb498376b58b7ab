// The PLT entries through which a library's own code calls a symbol: a call to an exported
// function of the same library goes through one, since another module could interpose it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/relocations.h"

namespace tprof::symbolizer {

// The link-time addresses of the entries of .plt, .plt.sec and .plt.got that jump through a
// GOT slot the dynamic linker fills with one of `symbol_names` (mangled), in section order.
std::vector<uint64_t> plt_stubs_for(const ElfFile& elf, const Relocations& relocations,
                                    const std::vector<std::string_view>& symbol_names);

}  // namespace tprof::symbolizer
