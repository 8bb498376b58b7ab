#include "tests/fuzz/recover_input.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "exporters/partial_recovery.h"
#include "tests/fuzz/fuzz_files.h"

namespace tprof::fuzz {
namespace {

// nlohmann's SAX parser keeps its nesting on the heap, so a deep input cannot overflow this check.
bool holds_json(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  return nlohmann::json::accept(text);
}

}  // namespace

void recover_input(const std::string& partial_name, const uint8_t* data, size_t size) {
  const std::string partial = write_input(partial_name, data, size);
  const std::string recovered = partial.substr(0, partial.size() - std::string_view(".partial").size());
  ::unlink(recovered.c_str());  // left by an input that failed the check below
  try {
    exporters::recover_partial_file(partial, 0644);
  } catch (const std::exception&) {
    ::unlink(partial.c_str());
    return;
  }
  if (!holds_json(recovered)) {
    std::fprintf(stderr, "recover wrote %s, which is not valid JSON\n", recovered.c_str());
    std::abort();
  }
  ::unlink(recovered.c_str());
}

}  // namespace tprof::fuzz
