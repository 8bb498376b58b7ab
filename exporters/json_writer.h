// Appending JSON fragments to a caller-owned buffer, so that writers can stream millions of
// events through one reused std::string instead of building a document in memory.
#pragma once

#include <charconv>
#include <concepts>
#include <string>
#include <string_view>
#include <vector>

namespace tprof::exporters {

// Appends `text` as a quoted JSON string. Escapes '"', '\\' and every control character
// (Perfetto aborts on raw ones, ../shared/docs/formats.md §1.5) and replaces bytes that are
// not valid UTF-8 (e.g. from /proc/PID/comm) with U+FFFD, so the output is always valid JSON.
void append_json_string(std::string& out, std::string_view text);

template <std::integral Integer>
  requires(!std::same_as<Integer, bool>)
void append_json_integer(std::string& out, Integer value) {
  char digits[24];  // enough for any 64-bit value with its sign
  const auto result = std::to_chars(digits, digits + sizeof digits, value);
  out.append(digits, result.ptr);
}

// Appends [a<separator>b...]: Kineto writes ", " between elements, the Execution Trace ",".
// `values`: any sized list of integers (std::vector, model::Dims).
template <typename Integers>
  requires std::integral<typename Integers::value_type>
void append_json_integer_list(std::string& out, const Integers& values, std::string_view separator) {
  out += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += separator;
    append_json_integer(out, values[i]);
  }
  out += ']';
}

}  // namespace tprof::exporters
