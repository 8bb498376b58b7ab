// The one error type of tprof: its message is a single line shown to the user as
// "tprof: error: <message>", and the process exits non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace tprof {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// "<what>: <strerror(errnum)>"
std::string errno_message(const std::string& what, int errnum);

}  // namespace tprof
