// libFuzzer target: `tprof report` of a saved trace, grouped by op and by op and input shapes,
// `tprof report --memory`'s summary and `tprof report --compile`'s.
#include <cstddef>
#include <cstdint>
#include <exception>

#include "tests/fuzz/fuzz_files.h"
#include "userspace/cli/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tprof::fuzz::write_input("fuzz.pt.trace.json", data, size);
  for (const bool group_by_shape : {false, true}) {
    try {
      tprof::totals_from_trace(path, group_by_shape);
    } catch (const std::exception&) {
      break;  // the CLI prints it as one line: no trace, or not one it can read
    }
  }
  try {
    tprof::memory_report_from_trace(path);
  } catch (const std::exception&) {
  }
  try {
    tprof::compile_summary_from_trace(path);
  } catch (const std::exception&) {
  }
  return 0;
}
