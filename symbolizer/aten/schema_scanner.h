// Finds operator schema strings ("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) ->
// Tensor") in the read-only data of a library, including the ones the linker stored only as the
// tail of a longer string.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tprof::symbolizer {

// Where a schema text was found. One bit each, so that a text seen in several places carries all
// of them; a larger value is stronger evidence that the text is the op's own registered schema.
enum SchemaEvidence : uint8_t {
  // The name begins a word of the identifier it was found in: the whole identifier, or after a
  // "_" ("real" in "view_as_real", not in "isreal"). Weakest: it only separates texts that are
  // otherwise equally supported.
  kNameStartsWord = 1 << 0,
  // Inside other text (a message, a script) rather than where a schema string begins.
  kEmbedded = 1 << 1,
  // The end of a longer "ns::name(...) -> ..." string (see kTailOfLiteral).
  kTailOfQualified = 1 << 2,
  // The end of a longer unqualified schema string: either the op's own literal that the linker
  // tail-merged into another ("cos(Tensor self) -> Tensor" inside "acos(...)"), or a coincidence
  // ("sin(Tensor[] self) -> Tensor[]" inside "_foreach_sin(...)", "conj(...) -> bool" inside
  // "is_conj(...)").
  kTailOfLiteral = 1 << 3,
  // A whole string "aten::add.Tensor(...) -> ...", as the JIT's operator tables write them: surely
  // this op, though sometimes a variant spelling of its schema.
  kAtenQualified = 1 << 4,
  // A whole unqualified string "add.Tensor(...) -> ...": the literal ATen's generated
  // RegisterSchema.cpp hands to m.def().
  kRegistrationLiteral = 1 << 5,
};

struct SchemaCandidate {
  std::string_view text;  // "add.Tensor(Tensor self, ...) -> Tensor", never with "aten::"
  uint8_t evidence = 0;   // SchemaEvidence bits of every place this exact text was found
};

// Every schema text in some bytes, looked up by the "name.overload" (or "name") it starts with.
// The views point into the scanned bytes, which must outlive the index.
class SchemaIndex {
 public:
  // Adds the schemas in `bytes`, the content of one read-only data section: NUL-terminated
  // strings and anything else. A candidate is any "name(.overload)?(" whose parenthesis closes on
  // ") -> " and whose text up to the NUL is printable ASCII. Because tail merging can leave a
  // string only as the end of another, every suffix of the identifier before a "(" that starts
  // with a letter or "_" is a candidate name. Names written "ns::name" count only for ns "aten".
  void scan(std::string_view bytes);

  // The distinct texts whose name and overload are exactly `qualified_name` ("add.Tensor",
  // "mm"), in the order first seen.
  std::span<const SchemaCandidate> find(std::string_view qualified_name) const;

 private:
  void scan_string(std::string_view string);
  void add(std::string_view qualified_name, std::string_view text, uint8_t evidence);

  std::unordered_map<std::string_view, std::vector<SchemaCandidate>> by_qualified_name_;
};

}  // namespace tprof::symbolizer
