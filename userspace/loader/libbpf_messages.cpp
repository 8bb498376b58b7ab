#include "userspace/loader/libbpf_messages.h"

#include <bpf/libbpf.h>

#include <cstdarg>
#include <cstdio>
#include <deque>
#include <mutex>

namespace tprof {
namespace {

// A verifier log runs to thousands of lines; the last ones say what was refused.
constexpr size_t kKeptMessages = 8;

std::mutex messages_mutex;
std::deque<std::string> messages;

int keep_message(enum libbpf_print_level level, const char* format, va_list arguments) {
  if (level == LIBBPF_DEBUG) return 0;
  char text[512];
  const int length = std::vsnprintf(text, sizeof text, format, arguments);
  if (length <= 0) return 0;
  std::string message(text);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  if (message.starts_with("libbpf: ")) message.erase(0, 8);
  std::lock_guard lock(messages_mutex);
  messages.push_back(std::move(message));
  if (messages.size() > kKeptMessages) messages.pop_front();
  return length;
}

}  // namespace

void route_libbpf_messages() {
  static std::once_flag routed;
  std::call_once(routed, [] { libbpf_set_print(keep_message); });
}

std::string take_libbpf_messages() {
  std::lock_guard lock(messages_mutex);
  std::string joined;
  for (const std::string& message : messages) joined += (joined.empty() ? "" : "; ") + message;
  messages.clear();
  return joined;
}

std::string with_libbpf_messages(std::string message) {
  const std::string said = take_libbpf_messages();
  return said.empty() ? message : message + " (libbpf: " + said + ")";
}

}  // namespace tprof
