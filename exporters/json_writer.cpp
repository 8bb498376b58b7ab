#include "exporters/json_writer.h"

#include <cstddef>

namespace tprof::exporters {
namespace {

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

bool is_continuation_byte(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Length of the well-formed UTF-8 sequence (RFC 3629 table) starting at text[pos], or 0 when
// it is malformed: a stray continuation byte, an overlong form, a surrogate, a code point above
// U+10FFFF, or a sequence cut short.
size_t utf8_sequence_length(std::string_view text, size_t pos) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  size_t length = 0;
  unsigned char second_min = 0x80;
  unsigned char second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() - pos < length) return 0;
  const auto second = static_cast<unsigned char>(text[pos + 1]);
  if (second < second_min || second > second_max) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (!is_continuation_byte(static_cast<unsigned char>(text[pos + i]))) return 0;
  }
  return length;
}

bool needs_escape(unsigned char byte) {
  return byte < 0x20 || byte == '"' || byte == '\\' || byte == 0x7F;  // DEL is iscntrl() too
}

void append_escaped_ascii(std::string& out, unsigned char byte) {
  switch (byte) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: {
      constexpr char kHexDigits[] = "0123456789abcdef";
      out += "\\u00";
      out += kHexDigits[byte >> 4];
      out += kHexDigits[byte & 0xF];
    }
  }
}

}  // namespace

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  size_t pos = 0;
  while (pos < text.size()) {
    // Copy the longest run that needs no attention in one go: names are almost always
    // plain ASCII.
    size_t run_end = pos;
    while (run_end < text.size()) {
      const auto byte = static_cast<unsigned char>(text[run_end]);
      if (byte >= 0x80 || needs_escape(byte)) break;
      ++run_end;
    }
    out.append(text, pos, run_end - pos);
    pos = run_end;
    if (pos == text.size()) break;

    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
      append_escaped_ascii(out, byte);
      ++pos;
    } else if (const size_t length = utf8_sequence_length(text, pos); length != 0) {
      out.append(text, pos, length);
      pos += length;
    } else {
      out += kReplacementCharacter;
      ++pos;
    }
  }
  out += '"';
}

}  // namespace tprof::exporters
