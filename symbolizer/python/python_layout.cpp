#include "symbolizer/python/python_layout.h"

namespace tprof::symbolizer {

std::string PythonVersion::to_string() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(micro);
}

}  // namespace tprof::symbolizer
