#include "symbolizer/binary/call_sites.h"

#include <algorithm>
#include <cstring>

namespace tprof::symbolizer {
namespace {

constexpr uint8_t kCallRel32 = 0xe8;
constexpr uint8_t kJmpRel32 = 0xe9;
constexpr size_t kBranchLength = 5;  // the opcode and a 32-bit displacement

std::vector<uint64_t> branches_to(const SectionMap& sections, const std::vector<uint64_t>& targets, uint8_t opcode) {
  std::vector<uint64_t> sites;
  for (const SectionMap::Section& section : sections.sections()) {
    if (!section.executable) continue;
    const std::string_view code = section.bytes;
    for (size_t at = 0; at + kBranchLength <= code.size(); ++at) {
      if (static_cast<uint8_t>(code[at]) != opcode) continue;
      int32_t displacement = 0;
      std::memcpy(&displacement, code.data() + at + 1, sizeof(displacement));
      const uint64_t site = section.address + at;
      const uint64_t target = site + kBranchLength + static_cast<int64_t>(displacement);
      if (std::find(targets.begin(), targets.end(), target) != targets.end()) sites.push_back(site);
    }
  }
  return sites;
}

}  // namespace

std::vector<uint64_t> direct_calls_to(const SectionMap& sections, const std::vector<uint64_t>& targets) {
  return branches_to(sections, targets, kCallRel32);
}

std::vector<uint64_t> direct_jumps_to(const SectionMap& sections, const std::vector<uint64_t>& targets) {
  return branches_to(sections, targets, kJmpRel32);
}

}  // namespace tprof::symbolizer
