#include "userspace/session/compiled_kernel_watch.h"

#include <filesystem>
#include <stdexcept>
#include <utility>
#include <vector>

#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/emulated_probe_point.h"
#include "symbolizer/binary/library_index.h"
#include "symbolizer/binary/x86_disassembler.h"
#include "userspace/assemble/wall_clock.h"
#include "userspace/loader/exit_probes.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;

// The polling period for a target whose loader could not be probed. Reading a torch 2.6
// process's mappings (478 lines) took 0.6 ms on the test VM, of tprof's time; meanwhile the
// kernel holds the target's mmap lock for reading, which an mmap of the target waits for: with
// the loader probed, the mappings are read only after the target has loaded something.
constexpr uint64_t kLookPeriodNs = 1'000'000'000;
// Every glibc x86-64 loader is ld-linux-x86-64.so.2.
constexpr const char* kLoaderPrefix = "ld-linux";
// How many kernels' names one console line lists.
constexpr size_t kNamesShown = 4;

}  // namespace

bool may_be_inductor_kernel_library(std::string_view path) {
  const fs::path file(path);
  const std::string name = file.filename().string();
  return name.size() > 4 && name.front() == 'c' && name.ends_with(".so") &&
         file.parent_path().filename().string().size() == 2;
}

std::optional<InductorKernelSites> inductor_kernel_sites(const std::string& host_path) {
  const symbolizer::ElfFile elf(host_path);
  const symbolizer::LibraryIndex index(elf);
  const symbolizer::DefinedSymbol* kernel = symbolizer::inductor_kernel(index.symbols);
  if (!kernel) return std::nullopt;
  // Most kernels open with a `push` or a test and its jump, which the kernel emulates: tprof's
  // console measured 0.8 us for such an entry trap on the test VM, 9.6 us for a stepped one.
  // The entry program records the stack pointer its `ret`s are matched by, so nothing before the
  // probe may move it, and a kernel may loop at once, so the probe must lie before any loop.
  const uint64_t probed = symbolizer::emulated_entry_probe_address_run_once(
      index.sections, kernel->address, kernel->address + kernel->size, {symbolizer::kRsp});
  const auto entry = index.sections.file_offset_of(probed);
  if (!entry) throw std::runtime_error("its `kernel` lies in no section of the file");
  const ReturnSites returns = plan_return_sites(index, {kernel->address});
  return InductorKernelSites{UprobeSites{host_path, {*entry}, {}}, exit_sites(host_path, returns.offsets)};
}

CompiledKernelWatch::CompiledKernelWatch(const TargetProcess& target, TargetProbes& probes,
                                         const OpSelection& selection, AddOperator add_operator, Console& console)
    : target_(target),
      probes_(probes),
      selection_(selection),
      add_operator_(std::move(add_operator)),
      console_(console) {}

void CompiledKernelWatch::start() {
  try {
    if (const auto loader = target_.find_mapped_library(kLoaderPrefix)) {
      probes_.attach_library_loads(loader->host_path);
      loader_probed_ = true;
    }
  } catch (const std::exception& error) {
    console_.line(std::string("warning: new inductor kernels are looked for once a second: ") + error.what());
  }
  look();
}

void CompiledKernelWatch::look_if_due(uint64_t now_ns) {
  const bool due = loader_probed_ ? probes_.libraries_loaded() != loads_seen_ : now_ns - last_look_ns_ >= kLookPeriodNs;
  if (due) look();
}

void CompiledKernelWatch::look() {
  last_look_ns_ = monotonic_now_ns();
  loads_seen_ = probes_.libraries_loaded();
  // Each path is looked at once, whatever it turns out to be: a library stays what it is.
  const std::vector<MappedLibrary> candidates = target_.mapped_libraries([this](std::string_view path) {
    return may_be_inductor_kernel_library(path) && seen_.insert(std::string(path)).second;
  });
  std::vector<std::string> probed, left_out;
  for (const MappedLibrary& library : candidates) {
    std::string name;
    try {
      const Kernel kernel = probe(library, name);
      if (kernel != Kernel::kNone) (kernel == Kernel::kProbed ? probed : left_out).push_back(std::move(name));
    } catch (const std::exception& error) {
      console_.line("warning: inductor kernel " + library.path_in_target + " not probed: " + error.what());
    }
  }
  say_found("probing", probed, "");
  say_found("leaving out", left_out, selection_.describe());
}

void CompiledKernelWatch::say_found(const std::string& what, const std::vector<std::string>& names,
                                    const std::string& why) {
  if (names.empty()) return;
  std::string line = "torch.compile: " + what + " " + std::to_string(names.size()) + " new inductor C++ kernel" +
                     (names.size() == 1 ? "" : "s") + " (";
  for (size_t at = 0; at < names.size() && at < kNamesShown; ++at) line += (at ? ", " : "") + names[at];
  console_.line(line + (names.size() > kNamesShown ? ", ...)" : ")") + (why.empty() ? "" : ": " + why));
}

CompiledKernelWatch::Kernel CompiledKernelWatch::probe(const MappedLibrary& library, std::string& name) {
  std::optional<InductorKernelSites> sites = inductor_kernel_sites(library.host_path);
  if (!sites) return Kernel::kNone;
  name = names_.name_of(symbolizer::kernel_source_path(library.host_path));
  const std::string source_in_target = symbolizer::kernel_source_path(library.path_in_target);
  // Unnamed (no generated module of its cache binds its source): its source file's name.
  if (name.empty()) name = fs::path(source_in_target).filename().string();
  if (!selection_.probes(name)) return Kernel::kLeftOut;
  model::Operator op;
  op.name = name;
  op.kind = model::RangeKind::kCompiledKernel;
  op.source_file = source_in_target;
  sites->entry.cookies = {add_operator_(std::move(op))};
  probes_.attach_compiled_kernel(sites->entry, sites->returns);
  return Kernel::kProbed;
}

}  // namespace tprof
