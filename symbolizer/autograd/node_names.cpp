#include "symbolizer/autograd/node_names.h"

#include <cxxabi.h>

#include <array>
#include <cstdlib>
#include <memory>

namespace tprof::symbolizer {
namespace {

// How __cxa_demangle spells a special name (Itanium C++ ABI 5.1.4.1) next to its mangled
// prefix.
struct RttiKind {
  std::string_view mangled_prefix;
  std::string_view demangled_prefix;
};
constexpr std::array<RttiKind, 2> kRttiKinds = {{
    {"_ZTV", "vtable for "},
    {"_ZTI", "typeinfo for "},
}};

// torchgen puts every generated node in this namespace, each with
// `std::string name() const override { return "<ClassName>"; }`.
constexpr std::string_view kGeneratedNodeNamespace = "torch::autograd::generated::";

}  // namespace

std::optional<std::string> class_of_rtti_symbol(std::string_view mangled) {
  for (const RttiKind& kind : kRttiKinds) {
    if (!mangled.starts_with(kind.mangled_prefix)) continue;
    int status = 0;
    const std::unique_ptr<char, decltype(&std::free)> demangled(
        abi::__cxa_demangle(std::string(mangled).c_str(), nullptr, nullptr, &status), &std::free);
    if (status != 0 || !demangled) return std::nullopt;
    std::string_view text = demangled.get();
    if (!text.starts_with(kind.demangled_prefix)) return std::nullopt;
    text.remove_prefix(kind.demangled_prefix.size());
    return std::string(text);
  }
  return std::nullopt;
}

std::string profiler_node_name(std::string_view class_name) {
  if (class_name.starts_with(kGeneratedNodeNamespace)) {
    class_name.remove_prefix(kGeneratedNodeNamespace.size());
  }
  return std::string(class_name);
}

}  // namespace tprof::symbolizer
