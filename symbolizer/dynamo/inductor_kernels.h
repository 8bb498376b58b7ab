// Inductor's C++ kernels for the CPU, as torch.compile leaves them on disk. Each fused kernel
// is a shared library that inductor compiles into its cache and imports while the target runs:
//   torch 2.6:  <cache>/<2 chars>/c<hash>.so,      source <cache>/<2 chars>/c<hash>.cpp
//   torch 2.14: <cache>/<2 chars>/c<hash>.main.so, source <cache>/<2 chars>/c<hash>.main.cpp
// (<cache>: /tmp/torchinductor_<user>, or $TORCHINDUCTOR_CACHE_DIR). The library exports the
// kernel as the C function `kernel` and a Python module init, PyInit_kernel, whose one method
// calls it. The name torch's profiler gives the kernel (cpp_fused_<ops>_<n>, with
// TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1) is only in the generated Python module that binds
// it, in the same cache:
//   cpp_fused_mul_sin_0 = async_compile.cpp_pybinding([...argument types...], r'''<source>''')
// where <source> is the .cpp up to its Python bindings ("// Python bindings to call kernel():").
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>

#include "symbolizer/binary/defined_symbols.h"

namespace tprof::symbolizer {

// The symbol of `kernel` (its link-time address and size) when a library defining `symbols` is an
// inductor kernel library (it defines both `kernel` and `PyInit_kernel`); null otherwise.
const DefinedSymbol* inductor_kernel(const DefinedSymbols& symbols);

// The generated C++ beside a kernel library (it may be gone): c<hash>.so -> c<hash>.cpp,
// c<hash>.main.so -> c<hash>.main.cpp. Either side's path: tprof's or the target's.
std::string kernel_source_path(const std::string& library_path);

// The C++ source that a kernel library's .cpp and its Python binding share: the file up to
// its Python bindings, without the surrounding blank space.
std::string kernel_source_of_cpp(const std::string& cpp_text);

// Every `NAME = async_compile.cpp_pybinding([...], '''SOURCE''')` of one generated module, by
// SOURCE (as kernel_source_of_cpp gives it).
std::map<std::string, std::string, std::less<>> kernel_bindings_of_module(const std::string& module_text);

// Whether a range's name is an inductor C++ kernel's: "cpp_fused_<ops>_<n>" as tprof names it,
// or "graph_<id>_cpp_fused_<ops>_<n>" as torch's profiler does with kernel profiling built in.
bool is_inductor_kernel_name(std::string_view name);

// Names kernel libraries from the generated modules of their caches. The modules a cache holds
// are read once each, when a library is not found among those read so far.
class InductorKernelNames {
 public:
  // The name (cpp_fused_...) of the kernel whose generated C++ is at `source_path` (as this
  // process opens it), or "" when no module of its cache binds that source.
  std::string name_of(const std::filesystem::path& source_path);

 private:
  struct Cache {
    std::unordered_map<std::string, std::filesystem::file_time_type> modules_read;
    std::unordered_map<size_t, std::string> names_by_source_hash;
  };
  void read_new_modules(const std::filesystem::path& cache_path, Cache& cache);

  std::map<std::filesystem::path, Cache> caches_;
};

}  // namespace tprof::symbolizer
