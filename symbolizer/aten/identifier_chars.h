// The characters of C++ identifiers, which are also those of ATen op and overload names.
#pragma once

namespace tprof::symbolizer {

inline bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace tprof::symbolizer
