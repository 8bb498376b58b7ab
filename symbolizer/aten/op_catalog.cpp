#include "symbolizer/aten/op_catalog.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string_view>

#include "symbolizer/aten/argument_kinds.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/aten/op_symbols.h"
#include "symbolizer/aten/schema_scanner.h"

namespace tprof::symbolizer {
namespace {

constexpr std::string_view kAtenPrefix = "aten::";

// Schema strings are string literals: they live in allocated, read-only, non-executable data
// (.rodata, or .rodata.str* in objects that were not merged into one section).
bool may_hold_string_literals(const GElf_Shdr& header) {
  return header.sh_type == SHT_PROGBITS && (header.sh_flags & SHF_ALLOC) != 0 &&
         (header.sh_flags & (SHF_WRITE | SHF_EXECINSTR)) == 0;
}

SchemaIndex index_schemas(const ElfFile& elf) {
  SchemaIndex index;
  elf.for_each_section([&](const ElfSection& section) {
    if (may_hold_string_literals(section.header)) index.scan(elf.section_bytes(section));
  });
  return index;
}

// The "name.overload" strings torchgen could have turned into `unambiguous_name` by joining
// name and overload with "_": the name itself (no overload) and the name split at each "_".
// Names and overloads both contain "_" ("__and___Tensor", "sum_dim_IntList"), so all are tried.
std::vector<std::string> possible_qualified_names(std::string_view unambiguous_name) {
  std::vector<std::string> readings{std::string(unambiguous_name)};
  for (size_t split = 1; split + 1 < unambiguous_name.size(); ++split) {
    if (unambiguous_name[split] != '_') continue;
    std::string reading(unambiguous_name);
    reading[split] = '.';
    readings.push_back(std::move(reading));
  }
  return readings;
}

struct Match {
  std::string_view qualified_name;  // "add.Tensor"
  SchemaCandidate schema;
};

std::vector<Match> find_matches(const SchemaIndex& index, std::string_view unambiguous_name) {
  std::vector<Match> matches;
  for (const std::string& qualified_name : possible_qualified_names(unambiguous_name)) {
    for (const SchemaCandidate& schema : index.find(qualified_name)) {
      // A view of the library's bytes, unlike `qualified_name`, which is gone after the loop.
      matches.push_back(Match{schema.text.substr(0, qualified_name.size()), schema});
    }
  }
  return matches;
}

// Drops the matches whose arguments cannot be the call symbol's parameters (a tensor list where
// the function takes a tensor, a different count). Keeps all if the symbol does not demangle.
void keep_matching_signature(std::vector<Match>& matches, const OpCallSite& site) {
  std::optional<std::vector<ArgumentKind>> parameters =
      call_parameter_kinds(site.mangled_symbol.c_str());
  if (!parameters) return;
  std::erase_if(matches, [&](const Match& match) {
    return schema_argument_kinds(match.schema.text) != parameters;
  });
}

std::string full_schema(const Match& match) {
  return std::string(kAtenPrefix) + std::string(match.schema.text);
}

OpCatalogEntry unresolved_entry(const OpCallSite& site) {
  OpCatalogEntry entry;
  entry.site = site;
  entry.op_name = std::string(kAtenPrefix) + site.unambiguous_name;
  return entry;
}

// How a call site gets its schema:
//  1. Candidates are the schema texts named by any reading of its unambiguous name.
//  2. Those whose arguments contradict the call symbol's parameters are dropped. This settles the
//     tails of _foreach_* schemas ("sin(Tensor[] self)") and of longer names with other arguments.
//  3. The text with the strongest SchemaEvidence wins. The bits compare as a number: the strongest
//     place a text was seen decides, the next strongest breaks ties, and so on. A registration
//     literal beats a JIT table's "aten::" spelling (at times "-> (Tensor)" for "-> Tensor"),
//     which beats a mere tail ("conj(Tensor self) -> bool" inside is_conj's schema); where two
//     texts are only tails, the one whose name starts a word wins ("real" in view_as_real, not in
//     isreal).
// Checked against torch._C._jit_get_all_schemas() for every call site of torch 1.13.1 and 2.6.0:
// all (name, overload) pairs agree, and so do all schemas once both go through torch's schema
// parser (a literal spells defaults as written, "1e-05" where torch prints
// "1.0000000000000001e-05"). The close call is recorded in `collisions` (torch 2.6's "real"), as
// is any match of more than one (name, overload).
OpCatalogEntry resolve(const OpCallSite& site, const SchemaIndex& index,
                       std::vector<std::string>& collisions) {
  std::vector<Match> matches = find_matches(index, site.unambiguous_name);
  keep_matching_signature(matches, site);
  if (matches.empty()) return unresolved_entry(site);

  // The strongest evidence wins; among equals, the smallest text, only so that the choice is
  // stable from run to run.
  auto stronger = [](const Match& a, const Match& b) {
    if (a.schema.evidence != b.schema.evidence) return a.schema.evidence > b.schema.evidence;
    return a.schema.text < b.schema.text;
  };
  std::sort(matches.begin(), matches.end(), stronger);
  const Match& chosen = matches.front();
  const bool several_names = std::any_of(matches.begin(), matches.end(), [&](const Match& m) {
    return m.qualified_name != chosen.qualified_name;
  });
  // Worth a look when the runner-up was as well supported, short of the word-boundary hint.
  const bool close_call = matches.size() > 1 && (matches[1].schema.evidence | kNameStartsWord) ==
                                                    (chosen.schema.evidence | kNameStartsWord);
  if (several_names || close_call) {
    std::string line =
        site.unambiguous_name + ": chose " + full_schema(chosen) + "; also matched:";
    for (auto other = matches.begin() + 1; other != matches.end(); ++other) {
      line += (other == matches.begin() + 1 ? " " : " | ") + full_schema(*other);
    }
    collisions.push_back(std::move(line));
  }

  OpCatalogEntry entry;
  entry.site = site;
  entry.schema = full_schema(chosen);
  std::string_view qualified_name = chosen.qualified_name;
  size_t dot = qualified_name.find('.');
  entry.op_name = std::string(kAtenPrefix) + std::string(qualified_name.substr(0, dot));
  if (dot != std::string_view::npos) entry.overload = qualified_name.substr(dot + 1);
  return entry;
}

}  // namespace

OpCatalog build_op_catalog(const std::string& library_path) {
  ElfFile elf(library_path);
  std::vector<OpCallSite> sites = find_op_call_sites(elf);
  if (sites.empty()) {
    throw std::runtime_error("no at::_ops::*::call symbols in " + library_path +
                             ": not a libtorch_cpu?");
  }
  const SchemaIndex index = index_schemas(elf);
  OpCatalog catalog;
  catalog.entries.reserve(sites.size());
  for (const OpCallSite& site : sites) {
    catalog.entries.push_back(resolve(site, index, catalog.collisions));
    if (catalog.entries.back().schema.empty()) ++catalog.unresolved_count;
  }
  return catalog;
}

}  // namespace tprof::symbolizer
