// Inductor's C++ kernels on disk: which library is one, and the name torch's profiler gives its
// kernel, read from the generated module that binds the kernel's source (torch 2.6 quotes it
// '''...''', torch 2.14 r'''...'''). The e2e test (test_compile_e2e.cpp) runs the real thing.
#include "symbolizer/dynamo/inductor_kernels.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "symbolizer/binary/defined_symbols.h"
#include "symbolizer/binary/elf_file.h"
#include "tests/support/process_harness.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSineSource = R"(#include "/tmp/torchinductor_root/2r/c2rn.h"
extern "C"  void kernel(const float* in_ptr0,
                       float* out_ptr0)
{
    out_ptr0[0] = std::sin(in_ptr0[0]);
})";

constexpr const char* kCosineSource = R"(#include <torch/csrc/inductor/cpp_prefix.h>
extern "C"  void  kernel(const float* in_ptr0, float* out_ptr0)
{
    out_ptr0[0] = std::cos(in_ptr0[0]);
})";

std::string module_binding(const std::string& name, const std::string& quote, const std::string& source) {
  return name + " = async_compile.cpp_pybinding(['const float*', 'float*'], " + quote + "'''\n" + source + "\n''')\n";
}

// What inductor writes beside the library: the source, then its Python bindings.
std::string library_cpp(const std::string& source) {
  return "\n" + source + "\n\n// Python bindings to call kernel():\n#define PY_SSIZE_T_CLEAN\nstatic PyObject* kernel_py();\n";
}

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

TEST(InductorKernels, ModuleBindingsOfBothQuotings) {
  const std::string module = "import torch\nasync_compile = AsyncCompile()\n" +
                             module_binding("cpp_fused_sin_0", "", kSineSource) +
                             module_binding("cpp_fused_cos_1", "r", kCosineSource) +
                             "async_compile.wait(globals())\n"
                             "    x = not_a_binding = async_compile.cpp_pybinding([], '''ignored''')\n";
  const auto bindings = kernel_bindings_of_module(module);
  ASSERT_EQ(bindings.size(), 2u);
  EXPECT_EQ(bindings.at(kSineSource), "cpp_fused_sin_0");
  EXPECT_EQ(bindings.at(kCosineSource), "cpp_fused_cos_1");
}

TEST(InductorKernels, LibrarySourceStopsAtItsPythonBindings) {
  EXPECT_EQ(kernel_source_of_cpp(library_cpp(kSineSource)), kSineSource);
  EXPECT_EQ(kernel_source_of_cpp(kCosineSource), kCosineSource);  // no bindings: all of it
  EXPECT_EQ(kernel_source_of_cpp(" \n"), "");
}

TEST(InductorKernels, ALibrarysSourceLiesBesideIt) {
  EXPECT_EQ(kernel_source_path("/tmp/torchinductor_root/ab/cab.so"), "/tmp/torchinductor_root/ab/cab.cpp");
  EXPECT_EQ(kernel_source_path("/tmp/torchinductor_root/ab/cab.main.so"), "/tmp/torchinductor_root/ab/cab.main.cpp");
}

TEST(InductorKernels, NamesALibraryFromTheModulesOfItsCache) {
  const tprof::test::ScratchDirectory scratch;
  const fs::path cache = scratch.path() / "torchinductor_root";
  write(cache / "ab/cab.cpp", library_cpp(kSineSource));
  write(cache / "cd/ccd.main.cpp", library_cpp(kCosineSource));
  write(cache / "ef/cef.py", module_binding("cpp_fused_sin_0", "", kSineSource));
  InductorKernelNames names;
  EXPECT_EQ(names.name_of(cache / "ab/cab.cpp"), "cpp_fused_sin_0");
  // Not bound by any module yet: unnamed, until a module that binds it is written.
  EXPECT_EQ(names.name_of(cache / "cd/ccd.main.cpp"), "");
  write(cache / "gh/cgh.py", module_binding("cpp_fused_cos_3", "r", kCosineSource));
  EXPECT_EQ(names.name_of(cache / "cd/ccd.main.cpp"), "cpp_fused_cos_3");
  // A library whose source is gone has no name.
  EXPECT_EQ(names.name_of(cache / "ij/cij.cpp"), "");
}

TEST(InductorKernels, KernelNamesAsTprofAndAsTorchsProfilerGiveThem) {
  EXPECT_TRUE(is_inductor_kernel_name("cpp_fused_add_mul_sin_0"));
  EXPECT_TRUE(is_inductor_kernel_name("graph_12_cpp_fused_add_mul_sin_0"));
  EXPECT_FALSE(is_inductor_kernel_name("cpp_fused_"));
  EXPECT_FALSE(is_inductor_kernel_name("graph__cpp_fused_sin_0"));
  EXPECT_FALSE(is_inductor_kernel_name("graph_1cpp_fused_sin_0"));
  EXPECT_FALSE(is_inductor_kernel_name("aten::sin"));
}

// This test binary defines a `kernel` function of its own, but no PyInit_kernel: it is no kernel
// library.
extern "C" [[gnu::used, gnu::noinline]] int kernel(int value) { return value + 1; }

TEST(InductorKernels, OnlyALibraryDefiningKernelAndItsModuleInitIsOne) {
  const ElfFile elf("/proc/self/exe");
  const DefinedSymbols symbols(elf);
  ASSERT_NE(symbols.find("kernel"), nullptr) << "the test's own `kernel` is not in its symbol table";
  EXPECT_FALSE(inductor_kernel(symbols));
}

}  // namespace
}  // namespace tprof::symbolizer
