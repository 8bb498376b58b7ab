#include "userspace/cli/error.h"

#include <cstring>

namespace tprof {

std::string errno_message(const std::string& what, int errnum) {
  return what + ": " + std::strerror(errnum);
}

}  // namespace tprof
