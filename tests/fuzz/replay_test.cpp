// Replays a fuzz target's seed corpus and the crashes it once found (tests/fuzz/corpus/<target>,
// tests/fuzz/regressions/<target>) through its LLVMFuzzerTestOneInput, in every build: the
// fuzz build's sanitizers are not needed for the inputs to keep passing.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tests/fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

void replay_directory(const fs::path& directory) {
  if (!fs::exists(directory)) return;  // a target with no regressions yet
  for (const auto& entry : fs::directory_iterator(directory)) {
    if (!entry.is_regular_file() || entry.path().filename().string().starts_with(".")) continue;
    SCOPED_TRACE(entry.path().string());
    std::ifstream file(entry.path(), std::ios::binary);
    const std::vector<uint8_t> input{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    EXPECT_EQ(LLVMFuzzerTestOneInput(input.data(), input.size()), 0);
  }
}

TEST(FuzzReplay, SeedCorpus) { replay_directory(fs::path(TPROF_FUZZ_DIR) / "corpus" / TPROF_FUZZ_TARGET); }

TEST(FuzzReplay, Regressions) { replay_directory(fs::path(TPROF_FUZZ_DIR) / "regressions" / TPROF_FUZZ_TARGET); }

// Every test's scratch files go with the process.
class RemoveScratch : public ::testing::Environment {
  void TearDown() override { fs::remove_all(tprof::fuzz::scratch_directory()); }
};
const auto* const kRemoveScratch = ::testing::AddGlobalTestEnvironment(new RemoveScratch);

}  // namespace
