#include "tests/support/torch_libraries.h"

#include <chrono>
#include <filesystem>

#include "tests/support/process_harness.h"
#include "tests/support/test_environment.h"

namespace tprof::testing {
namespace {

namespace fs = std::filesystem;

// Debian's multiarch library directory, relative to a root: where debian_libtorch_cpu() lies
// on this machine, and where the trixie root keeps its libraries.
const fs::path kLibraryDirectory = fs::path(debian_libtorch_cpu()).parent_path().relative_path();

constexpr std::string_view kLibc10Preamble = R"PY(
import ctypes, json, sys, torch
c10 = ctypes.CDLL("libc10.so." + ".".join(torch.__version__.split(".")[:2]))
def word(address): return ctypes.c_uint64.from_address(address).value
)PY";

// Importing torch and running a short script takes seconds; three minutes means it hangs.
constexpr std::chrono::seconds kScriptTimeout(180);

}  // namespace

std::string TorchInstall::library(std::string_view stem) const {
  return (fs::path(library_directory) / (std::string(stem) + ".so." + version)).string();
}

std::optional<std::string> TorchInstall::missing(std::string_view stem) const {
  for (const std::string& path : {finished_marker, library(stem)}) {
    if (!path.empty() && !fs::exists(path)) {
      return "SKIPPED LOUDLY: " + path + " is missing (" + provided_by + ")";
    }
  }
  return std::nullopt;
}

void PrintTo(const TorchInstall& torch, std::ostream* out) { *out << torch.name; }

const TorchInstall& debian_torch113() {
  static const TorchInstall torch{
      .name = "torch113",
      .version = "1.13",
      .python = {"/usr/bin/python3"},
      .library_directory = (fs::path("/") / kLibraryDirectory).string(),
      .finished_marker = "",
      .provided_by = "Debian libtorch1.13",
  };
  return torch;
}

const TorchInstall& trixie_torch26() {
  static const TorchInstall torch{
      .name = "torch26_trixie_chroot",
      .version = "2.6",
      .python = {"chroot", trixie_root(), "python3"},
      .library_directory = (fs::path(trixie_root()) / kLibraryDirectory).string(),
      .finished_marker = (fs::path(trixie_root()) / ".tprof-complete").string(),
      .provided_by = "no finished trixie root with torch 2.6: scripts/make-torch-root.sh trixie builds it",
  };
  return torch;
}

const TorchInstall& sid_torch214() {
  static const TorchInstall torch{
      .name = "torch214_sid_chroot",
      .version = "2.14",
      .python = {"chroot", sid_root(), "python3"},
      .library_directory = (fs::path(sid_root()) / kLibraryDirectory).string(),
      .finished_marker = (fs::path(sid_root()) / ".tprof-complete").string(),
      .provided_by = "no finished sid root with torch 2.14: scripts/make-torch-root.sh sid builds it",
  };
  return torch;
}

TorchScriptRun run_with_libc10(const TorchInstall& torch, std::string_view script,
                               const std::vector<std::string>& arguments) {
  std::vector<std::string> command = torch.python;
  command.insert(command.end(), {"-c", std::string(kLibc10Preamble) + std::string(script)});
  command.insert(command.end(), arguments.begin(), arguments.end());
  const test::CommandResult result = test::run_command(command, kScriptTimeout);
  TorchScriptRun run;
  if (!result.status) {
    run.failure = "timed out";
  } else if (!result.status->succeeded()) {
    run.failure = result.status->describe();
  } else {
    for (const std::string& line : result.stdout_lines) {
      if (line.starts_with("{")) run.objects.push_back(nlohmann::json::parse(line));
    }
  }
  return run;
}

}  // namespace tprof::testing
