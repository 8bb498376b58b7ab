#include "symbolizer/dynamo/wait_counter_sites.h"

#include <initializer_list>
#include <string_view>

#include "symbolizer/binary/emulated_probe_point.h"
#include "symbolizer/binary/x86_disassembler.h"

namespace tprof::symbolizer {
namespace {

// The complete-object constructor; GCC emits the base-object one (C2) at the same address.
constexpr std::string_view kConstructor =
    "_ZN3c107monitor17WaitCounterHandleC1ESt17basic_string_viewIcSt11char_traitsIcEE";
constexpr std::string_view kStart = "_ZN3c107monitor17WaitCounterHandle5startEv";
constexpr std::string_view kStop = "_ZN3c107monitor17WaitCounterHandle4stopERKNS_11SmallVectorIlLj6EEE";

std::optional<uint64_t> probe_offset(const LibraryIndex& libc10, const DefinedSymbol* symbol,
                                     std::initializer_list<size_t> kept_registers) {
  if (!symbol) return std::nullopt;
  return libc10.sections.file_offset_of(
      emulated_entry_probe_address(libc10.sections, symbol->address, kept_registers));
}

}  // namespace

std::optional<WaitCounterSites> find_wait_counter_sites(const LibraryIndex& libc10) {
  const DefinedSymbol* constructor_symbol = libc10.symbols.find(kConstructor);
  const auto constructor = probe_offset(libc10, constructor_symbol, {kRdi, kRsi, kRdx});
  const auto start = probe_offset(libc10, libc10.symbols.find(kStart), {kRsi});
  const auto stop = probe_offset(libc10, libc10.symbols.find(kStop), {kRdi});
  if (!constructor || !start || !stop) return std::nullopt;
  return WaitCounterSites{constructor_symbol->address, *constructor, *start, *stop};
}

}  // namespace tprof::symbolizer
