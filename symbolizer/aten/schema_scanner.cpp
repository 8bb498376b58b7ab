#include "symbolizer/aten/schema_scanner.h"

#include <algorithm>

#include "symbolizer/aten/identifier_chars.h"

namespace tprof::symbolizer {
namespace {

// Every schema has this between its arguments and its returns, so the scan jumps from one
// occurrence to the next and looks closer only at the strings that contain it.
constexpr std::string_view kArgumentsEnd = ") -> ";
constexpr std::string_view kAtenNamespace = "aten";

bool can_start_name(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

bool is_printable_ascii(char c) { return c >= 0x20 && c <= 0x7e; }

// The position of the ")" that closes the "(" at `open`, or npos.
size_t matching_close(std::string_view text, size_t open) {
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')' && --depth == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

// "Tensor", "(Tensor values, Tensor indices)", "Tensor(a!)[]", "()": non-empty, parentheses
// balanced. Rejects the run-on text of character arrays that are not NUL-terminated.
bool is_plausible_returns(std::string_view returns) {
  if (returns.empty()) return false;
  int depth = 0;
  for (char c : returns) {
    if (c == '(') ++depth;
    if (c == ')' && --depth < 0) return false;
  }
  return depth == 0;
}

// "quantized" for the run at `name_begin` in "quantized::add(...)"; empty when not qualified.
std::string_view namespace_before(std::string_view text, size_t name_begin) {
  if (name_begin < 2 || text.substr(name_begin - 2, 2) != "::") return {};
  size_t namespace_begin = name_begin - 2;
  while (namespace_begin > 0 && is_identifier_char(text[namespace_begin - 1])) --namespace_begin;
  return text.substr(namespace_begin, name_begin - 2 - namespace_begin);
}

// "add.Tensor" or "mm": one optional "." with something after it.
bool is_valid_qualified_name(std::string_view name) {
  size_t dot = name.find('.');
  if (dot == std::string_view::npos) return true;
  return dot + 1 < name.size() && name.find('.', dot + 1) == std::string_view::npos;
}

}  // namespace

void SchemaIndex::scan(std::string_view bytes) {
  size_t search_from = 0;
  while (search_from < bytes.size()) {
    size_t arguments_end = bytes.find(kArgumentsEnd, search_from);
    if (arguments_end == std::string_view::npos) break;
    size_t string_begin = bytes.rfind('\0', arguments_end);
    string_begin = string_begin == std::string_view::npos ? 0 : string_begin + 1;
    size_t string_end = std::min(bytes.find('\0', arguments_end), bytes.size());
    scan_string(bytes.substr(string_begin, string_end - string_begin));
    search_from = string_end;
  }
}

void SchemaIndex::scan_string(std::string_view string) {
  // Where the name of a string qualified as a whole begins: 6 in "aten::add.Tensor(...)".
  size_t leading_identifier_end = 0;
  while (leading_identifier_end < string.size() &&
         is_identifier_char(string[leading_identifier_end])) {
    ++leading_identifier_end;
  }
  size_t qualified_name_begin = 0;
  if (leading_identifier_end > 0 && string.substr(leading_identifier_end).starts_with("::")) {
    qualified_name_begin = leading_identifier_end + 2;
  }
  // A schema is printable to its end, so a candidate must begin after the last byte that is not.
  size_t printable_from = string.size();
  while (printable_from > 0 && is_printable_ascii(string[printable_from - 1])) --printable_from;

  for (size_t open = string.find('('); open != std::string_view::npos;
       open = string.find('(', open + 1)) {
    size_t run_begin = open;  // the identifier characters and dots right before the "("
    while (run_begin > printable_from &&
           (is_identifier_char(string[run_begin - 1]) || string[run_begin - 1] == '.')) {
      --run_begin;
    }
    if (run_begin == open) continue;
    size_t close = matching_close(string, open);
    if (close == std::string_view::npos || !string.substr(close).starts_with(kArgumentsEnd) ||
        !is_plausible_returns(string.substr(close + kArgumentsEnd.size()))) {
      continue;
    }

    std::string_view run_namespace = namespace_before(string, run_begin);
    const bool qualified_by_other_namespace =
        !run_namespace.empty() && run_namespace != kAtenNamespace;
    for (size_t begin = run_begin; begin < open; ++begin) {
      if (!can_start_name(string[begin])) continue;
      std::string_view qualified_name = string.substr(begin, open - begin);
      if (!is_valid_qualified_name(qualified_name)) continue;
      uint8_t evidence = kEmbedded;
      if (begin == run_begin) {
        // Another namespace's operator ("quantized::add(...)") is not this ATen op.
        if (qualified_by_other_namespace) continue;
        if (run_begin == 0) {
          evidence = kRegistrationLiteral;
        } else if (run_begin == qualified_name_begin) {
          evidence = kAtenQualified;  // the whole string is "aten::<name>(...) -> ..."
        }
      } else if (run_begin == 0) {
        evidence = kTailOfLiteral;
      } else if (run_begin == qualified_name_begin) {
        evidence = kTailOfQualified;
      }
      if (begin == run_begin || string[begin - 1] == '_') evidence |= kNameStartsWord;
      add(qualified_name, string.substr(begin), evidence);
    }
  }
}

void SchemaIndex::add(std::string_view qualified_name, std::string_view text,
                      uint8_t evidence) {
  std::vector<SchemaCandidate>& texts = by_qualified_name_[qualified_name];
  auto same_text = std::find_if(texts.begin(), texts.end(),
                                [&](const SchemaCandidate& known) { return known.text == text; });
  if (same_text == texts.end()) {
    texts.push_back(SchemaCandidate{.text = text, .evidence = evidence});
  } else {
    same_text->evidence |= evidence;
  }
}

std::span<const SchemaCandidate> SchemaIndex::find(std::string_view qualified_name) const {
  auto found = by_qualified_name_.find(qualified_name);
  if (found == by_qualified_name_.end()) return {};
  return found->second;
}

}  // namespace tprof::symbolizer
