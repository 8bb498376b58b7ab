// Which op sites get probed, and the op ids the BPF cookies carry.
#include <gtest/gtest.h>

#include "userspace/loader/probe_plan.h"

namespace tprof {
namespace {

symbolizer::OpCatalogEntry entry(std::string op_name, uint64_t file_offset) {
  symbolizer::OpCatalogEntry catalog_entry;
  catalog_entry.op_name = std::move(op_name);
  catalog_entry.schema = catalog_entry.op_name + "(...) -> Tensor";
  catalog_entry.site.file_offset = file_offset;
  return catalog_entry;
}

TEST(ProbePlan, CookiesAreIndexesOfTheOperators) {
  symbolizer::OpCatalog catalog;
  catalog.entries = {entry("aten::add", 0x100), entry("aten::mm", 0x200)};
  const ProbePlan plan = plan_op_probes(catalog, "/lib/libtorch_cpu.so");
  EXPECT_EQ(plan.sites.binary_path, "/lib/libtorch_cpu.so");
  ASSERT_EQ(plan.sites.offsets, (std::vector<unsigned long>{0x100, 0x200}));
  ASSERT_EQ(plan.sites.cookies, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(plan.operators[1].name, "aten::mm");
  EXPECT_EQ(plan.operators[1].schema, "aten::mm(...) -> Tensor");
}

TEST(ProbePlan, SkipsOpsTorchNeverRecordsAndFoldedAddresses) {
  symbolizer::OpCatalog catalog;
  catalog.entries = {entry("aten::size", 0x100), entry("aten::is_leaf", 0x180), entry("aten::relu", 0x200),
                     entry("aten::relu_alias", 0x200), entry("aten::output_nr", 0x280),
                     entry("aten::_version", 0x300), entry("aten::is_complex", 0x380)};
  const ProbePlan plan = plan_op_probes(catalog, "lib");
  ASSERT_EQ(plan.operators.size(), 1u);
  EXPECT_EQ(plan.operators[0].name, "aten::relu");
  EXPECT_EQ(plan.shared_address_skipped, 1u);
}

}  // namespace
}  // namespace tprof
