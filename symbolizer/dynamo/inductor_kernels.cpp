#include "symbolizer/dynamo/inductor_kernels.h"

#include <fstream>
#include <iterator>
#include <string_view>
#include <system_error>


namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kBindingsMarker = "// Python bindings to call kernel():";
constexpr std::string_view kBinding = " = async_compile.cpp_pybinding(";
constexpr std::string_view kTripleQuote = "'''";
constexpr std::string_view kBlank = " \t\r\n";

std::string_view trimmed(std::string_view text) {
  const size_t first = text.find_first_not_of(kBlank);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kBlank) - first + 1);
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

bool is_inductor_kernel_name(std::string_view name) {
  constexpr std::string_view kKernelPrefix = "cpp_fused_";
  constexpr std::string_view kGraphPrefix = "graph_";
  if (name.starts_with(kGraphPrefix)) {
    const size_t digits_end = name.find_first_not_of("0123456789", kGraphPrefix.size());
    if (digits_end == kGraphPrefix.size() || digits_end == std::string_view::npos || name[digits_end] != '_') return false;
    name.remove_prefix(digits_end + 1);
  }
  return name.starts_with(kKernelPrefix) && name.size() > kKernelPrefix.size();
}

const DefinedSymbol* inductor_kernel(const DefinedSymbols& symbols) {
  const DefinedSymbol* kernel = symbols.find("kernel");
  return kernel && symbols.find("PyInit_kernel") ? kernel : nullptr;
}

std::string kernel_source_path(const std::string& library_path) {
  return fs::path(library_path).replace_extension(".cpp").string();
}

std::string kernel_source_of_cpp(const std::string& cpp_text) {
  const std::string_view text = cpp_text;
  return std::string(trimmed(text.substr(0, text.find(kBindingsMarker))));
}

std::map<std::string, std::string, std::less<>> kernel_bindings_of_module(const std::string& module_text) {
  std::map<std::string, std::string, std::less<>> bindings;
  const std::string_view text = module_text;
  for (size_t at = text.find(kBinding); at != std::string_view::npos; at = text.find(kBinding, at + 1)) {
    size_t name_start = at;
    while (name_start > 0 && is_identifier_char(text[name_start - 1])) --name_start;
    if (name_start == at || (name_start > 0 && text[name_start - 1] != '\n')) continue;  // not `NAME = ...` at a line start
    const size_t open = text.find(kTripleQuote, at);
    if (open == std::string_view::npos) break;
    const size_t body = open + kTripleQuote.size();
    const size_t close = text.find(kTripleQuote, body);
    if (close == std::string_view::npos) break;
    bindings.emplace(std::string(trimmed(text.substr(body, close - body))), std::string(text.substr(name_start, at - name_start)));
    at = close;
  }
  return bindings;
}

std::string InductorKernelNames::name_of(const fs::path& source_path) {
  const std::string source = kernel_source_of_cpp(read_file(source_path));
  if (source.empty()) return "";
  const size_t key = std::hash<std::string>{}(source);
  // The source's directory is one of the cache's two-character buckets.
  const fs::path cache_path = source_path.parent_path().parent_path();
  Cache& cache = caches_[cache_path];
  if (const auto found = cache.names_by_source_hash.find(key); found != cache.names_by_source_hash.end())
    return found->second;
  read_new_modules(cache_path, cache);
  const auto found = cache.names_by_source_hash.find(key);
  return found != cache.names_by_source_hash.end() ? found->second : "";
}

// A module is read again only once rewritten: inductor writes each once, under its hash.
void InductorKernelNames::read_new_modules(const fs::path& cache_path, Cache& cache) {
  std::error_code error;
  for (const fs::directory_entry& bucket : fs::directory_iterator(cache_path, error)) {
    if (!bucket.is_directory(error) || bucket.path().filename().string().size() != 2) continue;
    for (const fs::directory_entry& file : fs::directory_iterator(bucket.path(), error)) {
      if (file.path().extension() != ".py") continue;
      const auto written = file.last_write_time(error);
      auto [read, is_new] = cache.modules_read.try_emplace(file.path().string(), written);
      if (!is_new && read->second == written) continue;
      read->second = written;
      for (const auto& [source, name] : kernel_bindings_of_module(read_file(file.path())))
        cache.names_by_source_hash.emplace(std::hash<std::string>{}(source), name);
    }
  }
}

}  // namespace tprof::symbolizer
