// Folded stacks as export_stacks writes them: outermost frame first, torch's frame text with
// spaces and semicolons made "_", the range's name last, self time in whole microseconds; ranges
// without a stack or under 1 us of self time are left out.
#include "exporters/folded_stacks_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/process_harness.h"

namespace tprof::exporters {
namespace {

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(FoldedStacksWriter, WritesEachRangesStackWeightedBySelfTime) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "stacks.txt";
  OutputFile out(path.string());
  FoldedStacksWriter writer(out);
  const model::PythonStack stack = {{"/w/model.py", 12, "Net.forward"}, {"/w/my train.py", 40, "train;step"}};
  const model::Operator linear{"aten::linear", ""};
  const model::Operator addmm{"aten::addmm", ""};
  const model::Operator step{"ProfilerStep#0", "", model::RangeKind::kUserAnnotation};
  const model::OpSpan child{.start_ns = 1'000, .end_ns = 4'500, .record_id = 3, .parent_record_id = 2};
  const model::OpSpan parent{.start_ns = 0, .end_ns = 10'000, .record_id = 2, .parent_record_id = 1};
  const model::OpSpan tiny{.start_ns = 20'000, .end_ns = 20'400, .record_id = 4, .parent_record_id = 1};
  const model::OpSpan whole{.start_ns = 0, .end_ns = 30'000, .record_id = 1};
  writer.op({7, child, addmm, &stack});   // 3.5 us
  writer.op({7, parent, linear, &stack});  // 10 us less its child's 3.5: 6 us
  writer.op({7, tiny, addmm, &stack});     // 0.4 us: left out
  writer.op({7, whole, step, nullptr});    // no stack: left out
  writer.finish({});
  out.commit();
  EXPECT_EQ(read_all(path),
            "/w/my_train.py(40):_train_step;/w/model.py(12):_Net.forward;aten::addmm 3\n"
            "/w/my_train.py(40):_train_step;/w/model.py(12):_Net.forward;aten::linear 6\n");
}

TEST(MemoryStacksWriter, WritesThePeaksHoldersWeightedByBytes) {
  test::ScratchDirectory scratch;
  const auto path = scratch.path() / "memory.folded";
  OutputFile out(path.string());
  MemoryStacksWriter writer(out);
  model::RunSummary summary;
  summary.memory = model::MemorySummary{};
  summary.memory->peak_holders = {
      {.bytes = 4096, .blocks = 2, .op = "aten::empty", .stack = {{"/w/model.py", 12, "forward"}, {"/w/train.py", 40, "step"}}},
      {.bytes = 64, .blocks = 1, .op = "", .stack = {{"/w/train.py", 41, "step"}}},
      {.bytes = 0, .blocks = 0, .op = "aten::gone", .stack = {}}};
  writer.finish(summary);
  out.commit();
  EXPECT_EQ(read_all(path),
            "/w/train.py(40):_step;/w/model.py(12):_forward;aten::empty 4096\n"
            "/w/train.py(41):_step;[no_op] 64\n");
}

}  // namespace
}  // namespace tprof::exporters
