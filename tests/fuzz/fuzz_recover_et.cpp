// libFuzzer target: `tprof recover` of an Execution Trace's partial file.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/recover_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tprof::fuzz::recover_input("fuzz.et.json.partial", data, size);
  return 0;
}
