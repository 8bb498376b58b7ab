#include "symbolizer/python/bytecode_loops.h"

#include <array>
#include <initializer_list>
#include <utility>

namespace tprof::symbolizer {
namespace {

// Inline cache code units after each opcode (specialized and instrumented ones included), as
// each interpreter's opcode._inline_cache_entries and _specializations say (a specialized or
// instrumented opcode has those of its base); opcodes not listed have none. Generated from
// CPython 3.11.7, 3.12.1, 3.13.0 (3.13.5 gives the same) and 3.14.10.
using CacheTable = std::array<uint8_t, 256>;

constexpr CacheTable cache_table(std::initializer_list<std::pair<uint8_t, uint8_t>> entries) {
  CacheTable table{};
  for (const auto& [opcode, caches] : entries) table[opcode] = caches;
  return table;
}

constexpr CacheTable kCaches311 = cache_table({
    {3, 1}, {4, 1}, {5, 1}, {6, 1}, {7, 1}, {8, 1}, {13, 1}, {14, 1}, {16, 1}, {17, 4}, {18, 4},
    {19, 4}, {20, 4}, {21, 4}, {22, 4}, {23, 4}, {24, 4}, {25, 4}, {26, 2}, {27, 2}, {28, 2},
    {29, 2}, {39, 4}, {40, 4}, {41, 4}, {42, 4}, {43, 4}, {47, 5}, {48, 5}, {55, 5}, {56, 10},
    {57, 10}, {58, 10}, {59, 10}, {60, 1}, {62, 10}, {63, 10}, {64, 1}, {65, 1}, {66, 1}, {67, 1},
    {72, 1}, {73, 1}, {76, 1}, {77, 1}, {78, 1}, {79, 1}, {80, 1}, {81, 1}, {92, 1}, {95, 4},
    {106, 4}, {107, 2}, {113, 1}, {116, 5}, {121, 1}, {122, 1}, {127, 1}, {141, 1}, {143, 1},
    {153, 4}, {154, 4}, {158, 4}, {159, 4}, {160, 10}, {166, 1}, {168, 1}, {169, 1}, {170, 1},
    {171, 4}, {177, 1}, {178, 1}, {179, 1}, {180, 1}});
constexpr CacheTable kCaches312 = cache_table({
    {6, 1}, {7, 1}, {8, 1}, {10, 1}, {13, 1}, {14, 1}, {16, 1}, {18, 1}, {19, 1}, {20, 1}, {21, 1},
    {22, 1}, {23, 3}, {24, 3}, {25, 1}, {28, 3}, {29, 3}, {34, 3}, {38, 3}, {39, 3}, {40, 3},
    {41, 3}, {42, 3}, {43, 3}, {44, 3}, {45, 3}, {46, 3}, {47, 3}, {48, 3}, {56, 3}, {57, 1},
    {58, 1}, {59, 1}, {60, 1}, {62, 1}, {63, 1}, {64, 1}, {65, 1}, {66, 1}, {67, 1}, {70, 9},
    {72, 9}, {73, 9}, {76, 9}, {77, 9}, {78, 9}, {79, 9}, {80, 9}, {81, 9}, {82, 9}, {92, 1},
    {93, 1}, {95, 4}, {106, 9}, {107, 1}, {111, 4}, {112, 4}, {113, 4}, {116, 4}, {122, 1},
    {123, 1}, {141, 1}, {148, 4}, {153, 4}, {159, 1}, {160, 1}, {161, 1}, {166, 1}, {167, 1},
    {168, 1}, {171, 3}, {237, 1}, {241, 3}, {248, 1}});
constexpr CacheTable kCaches313 = cache_table({
    {3, 1}, {5, 1}, {39, 1}, {40, 3}, {45, 1}, {53, 3}, {58, 1}, {59, 1}, {72, 1}, {77, 1}, {82, 9},
    {91, 4}, {93, 1}, {97, 1}, {98, 1}, {99, 1}, {100, 1}, {104, 1}, {108, 4}, {117, 1}, {150, 1},
    {151, 1}, {152, 1}, {153, 1}, {154, 1}, {155, 1}, {156, 1}, {157, 1}, {158, 1}, {159, 1},
    {160, 1}, {161, 1}, {162, 3}, {163, 3}, {164, 3}, {165, 3}, {166, 3}, {167, 3}, {168, 3},
    {169, 3}, {170, 3}, {171, 3}, {172, 3}, {173, 3}, {174, 3}, {175, 3}, {176, 3}, {177, 3},
    {178, 3}, {179, 3}, {180, 3}, {181, 3}, {182, 1}, {183, 1}, {184, 1}, {185, 1}, {186, 1},
    {187, 1}, {188, 1}, {189, 1}, {190, 1}, {191, 9}, {192, 9}, {193, 9}, {194, 9}, {195, 9},
    {196, 9}, {197, 9}, {198, 9}, {199, 9}, {200, 9}, {201, 9}, {202, 9}, {203, 4}, {204, 4},
    {205, 1}, {206, 1}, {208, 1}, {209, 4}, {210, 4}, {211, 4}, {212, 1}, {213, 1}, {214, 3},
    {215, 3}, {216, 3}, {217, 3}, {218, 3}, {219, 3}, {220, 1}, {221, 1}, {222, 1}, {242, 1},
    {243, 1}, {244, 3}, {249, 1}, {250, 1}, {251, 1}, {252, 1}, {253, 1}});
constexpr CacheTable kCaches314 = cache_table({
    {3, 5}, {38, 1}, {39, 3}, {44, 5}, {52, 3}, {55, 3}, {56, 1}, {57, 1}, {70, 1}, {75, 1},
    {80, 9}, {92, 4}, {96, 1}, {100, 1}, {101, 1}, {102, 1}, {103, 1}, {106, 1}, {110, 4}, {119, 1},
    {129, 5}, {130, 5}, {131, 5}, {132, 5}, {133, 5}, {134, 5}, {135, 5}, {136, 5}, {137, 5},
    {138, 5}, {139, 5}, {140, 5}, {141, 5}, {142, 5}, {143, 3}, {144, 3}, {145, 3}, {146, 3},
    {147, 3}, {148, 3}, {149, 3}, {150, 3}, {151, 3}, {152, 3}, {153, 3}, {154, 3}, {155, 3},
    {156, 3}, {157, 3}, {158, 3}, {159, 3}, {160, 3}, {161, 3}, {162, 3}, {163, 3}, {164, 3},
    {165, 3}, {166, 1}, {167, 1}, {168, 1}, {169, 1}, {170, 1}, {171, 1}, {172, 1}, {173, 1},
    {174, 1}, {175, 1}, {176, 1}, {177, 9}, {178, 9}, {179, 9}, {180, 9}, {181, 9}, {182, 9},
    {183, 9}, {184, 9}, {185, 9}, {186, 9}, {187, 9}, {188, 9}, {189, 9}, {192, 4}, {193, 4},
    {194, 1}, {195, 1}, {197, 1}, {198, 4}, {199, 4}, {200, 4}, {201, 1}, {202, 1}, {203, 3},
    {204, 3}, {205, 3}, {206, 3}, {207, 3}, {208, 3}, {209, 1}, {210, 1}, {211, 1}, {237, 1},
    {241, 1}, {242, 1}, {243, 1}, {244, 1}, {249, 1}, {250, 3}, {251, 3}, {253, 1}});

// What one version's decoder needs: which opcodes jump backwards by their argument (relative to
// the next instruction, past its caches), which carry an absolute target (3.9/3.10), and which
// make the code undecodable from outside.
struct Dialect {
  bool byte_units = false;  // 3.9: frames count bytes, not code units
  std::vector<uint8_t> extended_args = {};  // EXTENDED_ARG (and 3.11's EXTENDED_ARG_QUICK)
  std::vector<uint8_t> relative_backward = {};
  std::vector<uint8_t> absolute_jumps = {};
  std::vector<uint8_t> undecodable = {};
  const CacheTable* caches = nullptr;
};

std::optional<Dialect> dialect_for(const PythonVersion& version) {
  if (version.major != 3) return std::nullopt;
  switch (version.minor) {
    case 9:
    case 10:
      // JUMP_IF_FALSE_OR_POP, JUMP_IF_TRUE_OR_POP, JUMP_ABSOLUTE, POP_JUMP_IF_FALSE,
      // POP_JUMP_IF_TRUE, JUMP_IF_NOT_EXC_MATCH: targets in bytes (3.9) or code units (3.10).
      return Dialect{.byte_units = version.minor == 9, .extended_args = {144}, .absolute_jumps = {111, 112, 113, 114, 115, 121}};
    case 11:
      // JUMP_BACKWARD_NO_INTERRUPT, JUMP_BACKWARD, POP_JUMP_BACKWARD_IF_{NOT_NONE,NONE,FALSE,TRUE},
      // JUMP_BACKWARD_QUICK; EXTENDED_ARG_QUICK extends like EXTENDED_ARG.
      return Dialect{.extended_args = {144, 34}, .relative_backward = {134, 140, 173, 174, 175, 176, 38}, .caches = &kCaches311};
    case 12:
      // JUMP_BACKWARD_NO_INTERRUPT, JUMP_BACKWARD, INSTRUMENTED_JUMP_BACKWARD;
      // INSTRUMENTED_INSTRUCTION and INSTRUMENTED_LINE hide the opcode they replace.
      return Dialect{.extended_args = {144}, .relative_backward = {134, 140, 246}, .undecodable = {253, 254}, .caches = &kCaches312};
    case 13:
      // JUMP_BACKWARD, JUMP_BACKWARD_NO_INTERRUPT, INSTRUMENTED_JUMP_BACKWARD; ENTER_EXECUTOR
      // (a tier-2 executor in place of a JUMP_BACKWARD), INSTRUMENTED_INSTRUCTION, INSTRUMENTED_LINE.
      return Dialect{.extended_args = {71}, .relative_backward = {77, 78, 249}, .undecodable = {70, 247, 254}, .caches = &kCaches313};
    case 14:
      // JUMP_BACKWARD, JUMP_BACKWARD_NO_INTERRUPT, INSTRUMENTED_JUMP_BACKWARD, and
      // JUMP_BACKWARD_JIT, JUMP_BACKWARD_NO_JIT (JUMP_BACKWARD specialized where the JIT is built
      // in, on or off: Debian's); ENTER_EXECUTOR, INSTRUMENTED_INSTRUCTION, INSTRUMENTED_LINE.
      return Dialect{.extended_args = {69}, .relative_backward = {75, 76, 253, 175, 176}, .undecodable = {255, 238, 254}, .caches = &kCaches314};
    default:
      return std::nullopt;
  }
}

bool contains(const std::vector<uint8_t>& opcodes, uint8_t opcode) {
  for (const uint8_t candidate : opcodes)
    if (candidate == opcode) return true;
  return false;
}

}  // namespace

std::optional<std::vector<BackwardJump>> backward_jumps(const PythonVersion& version, std::span<const uint8_t> bytecode) {
  const auto dialect = dialect_for(version);
  if (!dialect || bytecode.size() % 2 != 0) return std::nullopt;
  const auto units = static_cast<uint32_t>(bytecode.size() / 2);
  const uint32_t scale = dialect->byte_units ? 2 : 1;  // frame units per code unit
  std::vector<BackwardJump> jumps;
  uint32_t argument = 0;
  for (uint32_t unit = 0; unit < units;) {
    const uint8_t opcode = bytecode[2 * unit];
    argument = argument << 8 | bytecode[2 * unit + 1];
    const uint32_t caches = dialect->caches ? (*dialect->caches)[opcode] : 0;
    const uint32_t next = unit + 1 + caches;
    if (contains(dialect->undecodable, opcode)) return std::nullopt;
    if (contains(dialect->extended_args, opcode)) {
      unit = next;
      continue;
    }
    if (contains(dialect->relative_backward, opcode)) {
      if (argument > next) return std::nullopt;
      jumps.push_back({unit * scale, (next - argument) * scale});
    } else if (contains(dialect->absolute_jumps, opcode)) {
      const uint32_t target_unit = dialect->byte_units ? argument / 2 : argument;
      if (target_unit >= units) return std::nullopt;
      if (target_unit <= unit) jumps.push_back({unit * scale, target_unit * scale});
    }
    argument = 0;
    unit = next;
  }
  return jumps;
}

bool loop_spans(const std::vector<BackwardJump>& jumps, uint32_t earlier, uint32_t later) {
  for (const BackwardJump& jump : jumps)
    if (jump.to <= earlier && jump.from >= later) return true;
  return false;
}

}  // namespace tprof::symbolizer
