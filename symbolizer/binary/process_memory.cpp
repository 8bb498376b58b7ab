#include "symbolizer/binary/process_memory.h"

#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tprof::symbolizer {
namespace {

size_t page_size() {
  static const size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

}  // namespace

bool ProcessMemory::read(uint64_t address, void* out, size_t size) const {
  auto* destination = static_cast<char*>(out);
  // process_vm_readv may stop short at a page it cannot read; a short count with no error
  // means the rest is unreadable, so retrying from there reports the real errno.
  while (size > 0) {
    iovec local{destination, size};
    iovec remote{reinterpret_cast<void*>(address), size};
    const ssize_t copied = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (copied < 0) return false;
    if (copied == 0) {
      errno = EFAULT;
      return false;
    }
    destination += copied;
    address += static_cast<uint64_t>(copied);
    size -= static_cast<size_t>(copied);
  }
  return true;
}

std::optional<std::string> ProcessMemory::read_string(uint64_t address, size_t max_length) const {
  std::string text;
  // Page by page: the string may end just before an unmapped page, and reading past its
  // NUL into that page must not turn a readable string into a failure.
  while (text.size() < max_length) {
    const size_t to_page_end = page_size() - address % page_size();
    const size_t chunk_size = std::min(to_page_end, max_length - text.size());
    const size_t old_size = text.size();
    text.resize(old_size + chunk_size);
    if (!read(address, text.data() + old_size, chunk_size)) return std::nullopt;
    const size_t nul = text.find('\0', old_size);
    if (nul != std::string::npos) {
      text.resize(nul);
      return text;
    }
    address += chunk_size;
  }
  return text;
}

}  // namespace tprof::symbolizer
