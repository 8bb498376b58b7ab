// Where c10's wait counters are named, started and stopped, in the real libc10 of Debian's torch
// 1.13 (none: it has no wait counters), torch 2.6 (trixie root) and torch 2.14 (sid root).
#include "symbolizer/dynamo/wait_counter_sites.h"

#include <gtest/gtest.h>

#include <string>

#include "symbolizer/binary/elf_file.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

std::optional<WaitCounterSites> sites_in(const std::string& libc10) {
  const ElfFile elf(libc10);
  return find_wait_counter_sites(LibraryIndex(elf));
}

TEST(WaitCounterSites, Torch113HasNone) {
  const testing::TorchInstall& torch = testing::debian_torch113();
  if (const auto missing = torch.missing("libc10")) GTEST_SKIP() << *missing;
  EXPECT_FALSE(sites_in(torch.library("libc10")));
}

// Each probe at its function's entry: past endbr64, a push the kernel emulates (every function
// in 2.6, the constructor in 2.14), or in 2.14's start() and stop() a `sub` with no push or jump
// before they read `this`, single-stepped (at compiles only).
void expect_sites_at_entries(const testing::TorchInstall& torch) {
  if (const auto missing = torch.missing("libc10")) GTEST_SKIP() << *missing;
  const ElfFile elf(torch.library("libc10"));
  const LibraryIndex index(elf);
  const auto sites = find_wait_counter_sites(index);
  ASSERT_TRUE(sites);
  const auto entry_of = [&](const char* symbol) {
    const DefinedSymbol* defined = index.symbols.find(symbol);
    return defined ? index.sections.file_offset_of(defined->address).value_or(0) : 0;
  };
  EXPECT_EQ(sites->constructor,
            entry_of("_ZN3c107monitor17WaitCounterHandleC1ESt17basic_string_viewIcSt11char_traitsIcEE"));
  EXPECT_EQ(sites->constructor_address,
            index.symbols.find("_ZN3c107monitor17WaitCounterHandleC2ESt17basic_string_viewIcSt11char_traitsIcEE")
                ->address);
  EXPECT_EQ(sites->start, entry_of("_ZN3c107monitor17WaitCounterHandle5startEv"));
  EXPECT_EQ(sites->stop, entry_of("_ZN3c107monitor17WaitCounterHandle4stopERKNS_11SmallVectorIlLj6EEE"));
  EXPECT_NE(sites->start, 0u);
}

TEST(WaitCounterSites, Torch26AtTheEntries) { expect_sites_at_entries(testing::trixie_torch26()); }

TEST(WaitCounterSites, Torch214AtTheEntries) { expect_sites_at_entries(testing::sid_torch214()); }

}  // namespace
}  // namespace tprof::symbolizer
