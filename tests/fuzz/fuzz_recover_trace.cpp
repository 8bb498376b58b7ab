// libFuzzer target: `tprof recover` of a Chrome trace's partial file.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/recover_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tprof::fuzz::recover_input("fuzz.pt.trace.json.partial", data, size);
  return 0;
}
