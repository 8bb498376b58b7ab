#include "symbolizer/binary/class_hierarchy.h"

#include <cstring>
#include <unordered_set>

namespace tprof::symbolizer {
namespace {

// A typeinfo object starts with its own vptr, which says its layout: the vtable of
// abi::__si_class_type_info (one public non-virtual base at offset 0) or of
// abi::__vmi_class_type_info (any other set of bases); abi::__class_type_info has no bases.
constexpr std::string_view kSingleBaseTypeinfoVtable = "_ZTVN10__cxxabiv120__si_class_type_infoE";
constexpr std::string_view kMultipleBaseTypeinfoVtable =
    "_ZTVN10__cxxabiv121__vmi_class_type_infoE";

// __si_class_type_info: vptr, name, base typeinfo pointer.
constexpr uint64_t kSingleBaseSlot = 16;
// __vmi_class_type_info: vptr, name, flags (4), base count (4), then per base a typeinfo
// pointer and an 8-byte offset/flags word.
constexpr uint64_t kBaseCountField = 20;
constexpr uint64_t kFirstBaseSlot = 24;
constexpr uint64_t kBaseEntrySize = 16;
// Far above any real class; stops a garbage count from walking off into other data.
constexpr uint32_t kMostBases = 64;

}  // namespace

ClassHierarchy::ClassHierarchy(const DefinedSymbols& symbols, const Relocations& relocations,
                               const SectionMap& sections)
    : symbols_(symbols), relocations_(relocations), sections_(sections) {}

std::vector<RelocatedPointer> ClassHierarchy::direct_bases(uint64_t typeinfo_address) const {
  std::vector<RelocatedPointer> bases;
  const auto add_base_in_slot = [&](uint64_t slot) {
    if (auto pointer = relocations_.pointer_at(slot)) bases.push_back(*pointer);
  };
  const std::optional<RelocatedPointer> layout = relocations_.pointer_at(typeinfo_address);
  if (!layout) return bases;
  if (layout->symbol == kSingleBaseTypeinfoVtable) {
    add_base_in_slot(typeinfo_address + kSingleBaseSlot);
  } else if (layout->symbol == kMultipleBaseTypeinfoVtable) {
    const std::string_view count_bytes = sections_.bytes_at(typeinfo_address + kBaseCountField);
    uint32_t count = 0;
    if (count_bytes.size() < sizeof(count)) return bases;
    std::memcpy(&count, count_bytes.data(), sizeof(count));
    for (uint32_t base = 0; base < count && base < kMostBases; ++base) {
      add_base_in_slot(typeinfo_address + kFirstBaseSlot + base * kBaseEntrySize);
    }
  }
  return bases;
}

bool ClassHierarchy::derives_from(std::string_view derived_typeinfo,
                                  std::string_view base_typeinfo) const {
  const DefinedSymbol* derived = symbols_.find(derived_typeinfo);
  if (derived == nullptr) return false;
  // A slot names the base's symbol, or (R_X86_64_RELATIVE, for a hidden or -Bsymbolic
  // definition) only its address.
  const DefinedSymbol* base = symbols_.find(base_typeinfo);
  const auto is_base = [&](const RelocatedPointer& link) {
    return link.symbol == base_typeinfo || (base && link.address == base->address);
  };
  std::vector<uint64_t> pending = {derived->address};
  std::unordered_set<uint64_t> visited;
  while (!pending.empty()) {
    const uint64_t typeinfo = pending.back();
    pending.pop_back();
    if (!visited.insert(typeinfo).second) continue;
    for (const RelocatedPointer& link : direct_bases(typeinfo)) {
      if (is_base(link)) return true;
      if (link.address) pending.push_back(*link.address);
    }
  }
  return false;
}

}  // namespace tprof::symbolizer
