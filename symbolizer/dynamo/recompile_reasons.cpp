#include "symbolizer/dynamo/recompile_reasons.h"

#include <string_view>

namespace tprof::symbolizer {
namespace {

constexpr std::string_view kCompileFunction = "_compile";
constexpr std::string_view kConvertFrameFile = "torch/_dynamo/convert_frame.py";
constexpr std::string_view kReasonLocal = "recompile_reason";    // torch 2.14: a str
constexpr std::string_view kReasonsLocal = "recompile_reasons";  // torch 2.6: a list of str
constexpr uint32_t kSlotBytes = 8;  // a PyObject* (3.9–3.13) or a _PyStackRef (3.14)

}  // namespace

bool is_dynamo_compile(const CodeInfo& code) {
  return code.name == kCompileFunction && code.filename.ends_with(kConvertFrameFile);
}

std::optional<recompile_reason_site> find_recompile_reason_site(const PythonLayout& layout, const ReadMemory& read,
                                                                uint64_t code_address) {
  const auto slots = read_frame_slots(layout, read, code_address);
  if (!slots) return std::nullopt;
  for (size_t index = 0; index < slots->names.size(); ++index) {
    const std::string& name = slots->names[index];
    if (name != kReasonLocal && name != kReasonsLocal) continue;
    recompile_reason_site site{};
    site.code = code_address;
    site.slot_tag_mask = layout.executable_tag_mask;  // frame slots are tagged as f_executable is
    site.local_offset = layout.frame_localsplus + kSlotBytes * static_cast<uint32_t>(index);
    site.flags = (name == kReasonsLocal ? RECOMPILE_REASON_IN_LIST : 0) |
                 ((slots->kinds[index] & kSlotIsCell) != 0 ? RECOMPILE_REASON_IN_CELL : 0);
    site.ascii_data = layout.unicode_ascii_data;
    return site;
  }
  return std::nullopt;
}

}  // namespace tprof::symbolizer
