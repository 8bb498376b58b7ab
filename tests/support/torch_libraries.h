// The torch builds the unit tests check the symbolizers against: Debian's torch 1.13,
// installed on this machine, and torch 2.6 in the trixie root that
// scripts/make-torch-root.sh trixie builds. A test whose torch is not there skips, loudly, rather
// than passing unnoticed.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace tprof::testing {

struct TorchInstall {
  std::string name;                 // for parameterized test names: "torch113", ...
  std::string version;              // "1.13": the libraries are libc10.so.1.13, ...
  std::vector<std::string> python;  // starts this torch's python3 (chrooted for the trixie root)
  std::string library_directory;    // as this process sees it
  // A file the installation writes last (the trixie root's), so that tests never read a
  // half-built one; empty when there is none.
  std::string finished_marker;
  std::string provided_by;  // where the skip message sends the reader

  // library("libc10"): libc10.so.<version> in library_directory.
  std::string library(std::string_view stem) const;

  // "SKIPPED LOUDLY: ..." when the installation is unfinished or library(stem) is missing;
  // nullopt when tests can use both.
  std::optional<std::string> missing(std::string_view stem) const;
};

// gtest prints a parameter of TEST_P through this.
void PrintTo(const TorchInstall& torch, std::ostream* out);

const TorchInstall& debian_torch113();
const TorchInstall& trixie_torch26();
const TorchInstall& sid_torch214();

// What a script printed in one torch's python3.
struct TorchScriptRun {
  std::string failure;                  // empty when it exited 0; else how it ended
  // Its stdout lines that are JSON objects, in order; none when it failed.
  std::vector<nlohmann::json> objects;
};

// Runs `script` in `torch`'s python3 with `arguments` as sys.argv[1:], after a preamble
// that imports ctypes, json, sys and torch, loads that torch's own libc10 as `c10` (ctypes)
// and defines word(address), the uint64 at an address.
TorchScriptRun run_with_libc10(const TorchInstall& torch, std::string_view script,
                               const std::vector<std::string>& arguments);

}  // namespace tprof::testing
