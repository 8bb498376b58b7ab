// Where the real libtorch_cpu op functions (Debian's torch 1.13, torch 2.6 in the trixie root,
// torch 2.14 built by GCC 16 in the sid root) store the doubles they receive in xmm registers,
// which tprof reads at a second probe: nearly every double is found, every probe site is a
// branch the kernel emulates, and at::_ops::batch_norm::call stores momentum and eps where its
// code does.
#include "symbolizer/binary/register_spills.h"

#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>

#include "symbolizer/aten/argument_plan.h"
#include "symbolizer/aten/op_catalog.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/binary/library_index.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

// jcc rel8 (70-7f), jcc rel32 (0f 80-8f), call rel32 (e8), jmp rel32 (e9), jmp rel8 (eb).
bool is_emulated_branch(std::string_view bytes) {
  if (bytes.size() < 2) return false;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  return (byte(0) >= 0x70 && byte(0) <= 0x7f) || (byte(0) == 0x0f && byte(1) >= 0x80 && byte(1) <= 0x8f) ||
         byte(0) == 0xe8 || byte(0) == 0xe9 || byte(0) == 0xeb;
}

struct OpDoubles {
  std::string name;
  uint64_t address = 0;
  std::vector<unsigned> registers;
};

class RegisterSpillsTest : public ::testing::TestWithParam<testing::TorchInstall> {
 protected:
  void SetUp() override {
    if (const auto missing = GetParam().missing("libtorch_cpu")) GTEST_SKIP() << *missing;
    elf_ = std::make_unique<ElfFile>(GetParam().library("libtorch_cpu"));
    index_ = std::make_unique<LibraryIndex>(*elf_);
    const OpCatalog catalog = build_op_catalog(GetParam().library("libtorch_cpu"));
    const auto optional_abi = optional_abi_of(catalog);
    ASSERT_TRUE(optional_abi.has_value());
    for (const OpCatalogEntry& entry : catalog.entries) {
      const OpArgumentPlan plan = plan_op_arguments(entry.schema, entry.site.mangled_symbol.c_str(), *optional_abi);
      OpDoubles doubles{entry.schema.substr(0, entry.schema.find('(')), entry.site.symbol_address, {}};
      for (size_t i = 0; i < plan.inputs.size() && i < plan.bpf.argument_count; ++i)
        if (plan.inputs[i].xmm_register) doubles.registers.push_back(*plan.inputs[i].xmm_register);
      if (!doubles.registers.empty()) ops_.push_back(std::move(doubles));
    }
  }

  std::unique_ptr<ElfFile> elf_;
  std::unique_ptr<LibraryIndex> index_;
  std::vector<OpDoubles> ops_;  // the ops that take doubles in xmm registers
};

TEST_P(RegisterSpillsTest, NearlyEveryDoubleIsFoundBehindAnEmulatedBranch) {
  size_t doubles = 0, found = 0, sites = 0, not_emulated = 0;
  std::string missed;
  for (const OpDoubles& op : ops_) {
    doubles += op.registers.size();
    const auto spills = find_register_spills(index_->sections, op.address, op.registers);
    const size_t here = spills ? spills->spills.size() : 0;
    found += here;
    if (here < op.registers.size()) missed += " " + op.name;
    if (!spills) continue;
    ++sites;
    if (!is_emulated_branch(index_->sections.bytes_at(spills->probe_address))) ++not_emulated;
    EXPECT_GT(spills->probe_address, op.address) << op.name;
  }
  std::cout << ops_.size() << " ops take " << doubles << " doubles in xmm registers; " << found << " found stored, at "
            << sites << " probe sites; not found in:" << missed << "\n";
  ASSERT_GT(doubles, 100u);
  EXPECT_EQ(not_emulated, 0u);
  EXPECT_GE(found * 100, doubles * 98);
}

TEST_P(RegisterSpillsTest, BatchNormStoresMomentumAndEpsInItsFrame) {
  const auto op = std::find_if(ops_.begin(), ops_.end(), [](const OpDoubles& o) { return o.name == "aten::batch_norm"; });
  ASSERT_NE(op, ops_.end());
  ASSERT_EQ(op->registers, (std::vector<unsigned>{0, 1}));  // momentum, eps
  const auto spills = find_register_spills(index_->sections, op->address, op->registers);
  ASSERT_TRUE(spills.has_value());
  ASSERT_EQ(spills->spills.size(), 2u);
  EXPECT_EQ(spills->spills[0].xmm, 0u);
  EXPECT_EQ(spills->spills[1].xmm, 1u);
  EXPECT_NE(spills->spills[0].displacement, spills->spills[1].displacement);
  if (GetParam().version == "1.13") {
    // Debian's build keeps a frame pointer: `movsd %xmm0,-0x110(%rbp)`, `movsd %xmm1,-0x118(%rbp)`.
    EXPECT_EQ(spills->spills[0].base, SpillBase::kFramePointer);
    EXPECT_EQ(spills->spills[0].displacement, -0x110);
    EXPECT_EQ(spills->spills[1].displacement, -0x118);
  }
  if (GetParam().version == "2.14") {
    // GCC 16 stores momentum in the entry block (`movsd %xmm0,-0x100(%rbp)`), but eps only
    // before the __tls_get_addr call every run makes (`movsd %xmm1,-0x110(%rbp)`).
    EXPECT_EQ(spills->spills[1].base, SpillBase::kFramePointer);
    EXPECT_EQ(spills->spills[0].displacement, -0x100);
    EXPECT_EQ(spills->spills[1].displacement, -0x110);
  }
}

TEST_P(RegisterSpillsTest, ARegisterThatIsNotAnArgumentIsNotFound) {
  const auto op = std::find_if(ops_.begin(), ops_.end(), [](const OpDoubles& o) { return o.name == "aten::batch_norm"; });
  ASSERT_NE(op, ops_.end());
  const std::vector<unsigned> unused = {5};
  EXPECT_FALSE(find_register_spills(index_->sections, op->address, unused).has_value());
}

INSTANTIATE_TEST_SUITE_P(Torch, RegisterSpillsTest,
                         ::testing::Values(testing::debian_torch113(), testing::trixie_torch26(), testing::sid_torch214()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tprof::symbolizer
