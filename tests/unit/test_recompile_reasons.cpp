// Where dynamo's `_compile` keeps why it compiles again, found in live interpreters (each
// installed pyenv CPython 3.9-3.13, and Debian's 3.11) from a stand-in for torch/_dynamo/convert_frame.py with both
// torch versions' shapes of the function: 2.6's list held in a cell, 2.14's plain str.
#include "symbolizer/dynamo/recompile_reasons.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "symbolizer/binary/process_memory.h"
#include "symbolizer/python/python_runtime.h"
#include "tests/support/process_harness.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConvertFrame = R"PY(import json
import time


def _compile(frame):  # torch 2.6: a list of reasons, read by a nested function
    recompile_reasons = None

    def format_guard_failures():
        return recompile_reasons[-1]

    return format_guard_failures


class Torch214:
    def _compile(self):  # torch 2.14: one str
        recompile_reason = None
        return recompile_reason


def compile_inner():  # no reason kept
    pass


print(json.dumps({"list_in_cell": id(_compile.__code__), "plain_str": id(Torch214._compile.__code__),
                  "other": id(compile_inner.__code__)}), flush=True)
time.sleep(3600)
)PY";

const char* const kInterpreters[] = {
    "/root/.pyenv/versions/3.9.18/bin/python3",
    "/root/.pyenv/versions/3.10.13/bin/python3",
    "/root/.pyenv/versions/3.11.7/bin/python3",
    "/root/.pyenv/versions/3.12.1/bin/python3",
    "/root/.pyenv/versions/3.13.0/bin/python3",
    "/usr/bin/python3.11",
};

class RecompileReasonSiteTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    if (!fs::exists(GetParam())) GTEST_SKIP() << "SKIPPED: " << GetParam() << " is not installed; NOT checked";
    const fs::path directory = scratch_.path() / "torch" / "_dynamo";
    fs::create_directories(directory);
    std::ofstream(directory / "convert_frame.py") << kConvertFrame;
    child_.emplace(test::SpawnOptions{.argv = {GetParam(), (directory / "convert_frame.py").string()},
                                      .pipe_stdout = true});
    const auto line = child_->stdout_lines().read_line(std::chrono::seconds(30));
    ASSERT_TRUE(line.has_value()) << GetParam() << " printed nothing";
    codes_ = nlohmann::json::parse(*line);
    std::string why_not;
    auto layout = discover_python(child_->pid(), &why_not);
    ASSERT_TRUE(layout.has_value()) << why_not;
    layout_ = *layout;
  }

  std::optional<recompile_reason_site> site_of(const char* function) {
    const ProcessMemory memory(child_->pid());
    return find_recompile_reason_site(
        layout_, [&memory](uint64_t address, void* out, size_t size) { return memory.read(address, out, size); },
        codes_.at(function).get<uint64_t>());
  }

  test::ScratchDirectory scratch_;
  std::optional<test::ChildProcess> child_;
  nlohmann::json codes_;
  PythonLayout layout_;
};

TEST_P(RecompileReasonSiteTest, ListInACellAsTorch26KeepsIt) {
  CodeObjectCache cache(layout_, ProcessMemory(child_->pid()));
  const CodeInfo* code = cache.lookup(codes_.at("list_in_cell").get<uint64_t>());
  ASSERT_NE(code, nullptr);
  EXPECT_TRUE(is_dynamo_compile(*code));
  const auto site = site_of("list_in_cell");
  ASSERT_TRUE(site.has_value());
  EXPECT_EQ(site->code, codes_.at("list_in_cell").get<uint64_t>());
  // Slots: the argument, then the plain local, then the cell (3.9/3.10 order them so too:
  // co_varnames, then co_cellvars).
  EXPECT_EQ(site->local_offset, layout_.frame_localsplus + 2 * 8);
  EXPECT_EQ(site->flags, RECOMPILE_REASON_IN_LIST | RECOMPILE_REASON_IN_CELL);
  EXPECT_EQ(site->ascii_data, layout_.unicode_ascii_data);
}

TEST_P(RecompileReasonSiteTest, PlainStrAsTorch214KeepsIt) {
  const auto site = site_of("plain_str");
  ASSERT_TRUE(site.has_value());
  EXPECT_EQ(site->local_offset, layout_.frame_localsplus + 1 * 8);  // after self
  EXPECT_EQ(site->flags, 0u);
}

TEST_P(RecompileReasonSiteTest, AFunctionWithoutTheLocalHasNoSite) {
  CodeObjectCache cache(layout_, ProcessMemory(child_->pid()));
  const CodeInfo* code = cache.lookup(codes_.at("other").get<uint64_t>());
  ASSERT_NE(code, nullptr);
  EXPECT_FALSE(is_dynamo_compile(*code));
  EXPECT_FALSE(site_of("other").has_value());
}

INSTANTIATE_TEST_SUITE_P(Interpreters, RecompileReasonSiteTest, ::testing::ValuesIn(kInterpreters),
                         [](const auto& info) {
                           std::string name = fs::path(info.param).parent_path().parent_path().filename().string();
                           if (name == "usr") name = "debian_3_11";
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace tprof::symbolizer
