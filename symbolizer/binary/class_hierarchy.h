// Whether one C++ class derives from another, read from the RTTI a library defines: each
// class's typeinfo object (_ZTI...) points at its direct bases' typeinfo objects (Itanium C++
// ABI 2.9.5), through pointer slots that the dynamic relocations fill.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/relocations.h"
#include "symbolizer/binary/section_map.h"

namespace tprof::symbolizer {

class ClassHierarchy {
 public:
  // All three must outlive this.
  ClassHierarchy(const DefinedSymbols& symbols, const Relocations& relocations,
                 const SectionMap& sections);

  // Whether the class whose typeinfo is the symbol `derived_typeinfo` ("_ZTIN5torch8autograd
  // 9generated11MmBackward0E") has the class of `base_typeinfo` among its direct or indirect
  // bases. False when this file does not define `derived_typeinfo`, or the chain to the base
  // leaves the typeinfo objects this file defines.
  bool derives_from(std::string_view derived_typeinfo, std::string_view base_typeinfo) const;

 private:
  // The slots that point at the direct bases' typeinfo objects.
  std::vector<RelocatedPointer> direct_bases(uint64_t typeinfo_address) const;

  const DefinedSymbols& symbols_;
  const Relocations& relocations_;
  const SectionMap& sections_;
};

}  // namespace tprof::symbolizer
