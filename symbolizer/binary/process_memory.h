// Reads another process's memory with process_vm_readv: no ptrace stop, no file descriptor,
// and the same permission rule as ptrace attach (same user, or CAP_SYS_PTRACE).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

namespace tprof::symbolizer {

class ProcessMemory {
 public:
  explicit ProcessMemory(pid_t pid) : pid_(pid) {}

  pid_t pid() const { return pid_; }

  // Copies exactly `size` bytes from `address` in the target into `out`. False if any byte
  // cannot be read (unmapped, no permission, process gone); errno tells why.
  bool read(uint64_t address, void* out, size_t size) const;

  // A trivially copyable value stored at `address` in the target's byte order (which is ours).
  template <typename T>
  std::optional<T> read_value(uint64_t address) const {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    if (!read(address, &value, sizeof(value))) return std::nullopt;
    return value;
  }

  // The NUL-terminated string at `address`, without its NUL. Stops after `max_length` bytes
  // when no NUL came first (the result then has exactly max_length bytes). nullopt if the
  // first byte cannot be read, or a later page fails before the string ended.
  std::optional<std::string> read_string(uint64_t address, size_t max_length) const;

 private:
  pid_t pid_;
};

}  // namespace tprof::symbolizer
