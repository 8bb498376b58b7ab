// Locating libtorch's autograd sequence counter from the machine code of
// at::sequence_number::peek(), in the two real torch builds.
#include "symbolizer/autograd/sequence_counter.h"

#include <gtest/gtest.h>

#include "symbolizer/binary/elf_file.h"
#include "tests/support/torch_libraries.h"

namespace tprof::symbolizer {
namespace {

struct Expected {
  const testing::TorchInstall& torch;
  uint64_t tls_index_address;  // read off `objdump -d` of peek(): the lea's target
  uint64_t field_offset;       // and the displacement of the load through rax
};

void expect_location(const Expected& expected) {
  if (const auto missing = expected.torch.missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  const ElfFile elf(expected.torch.library("libtorch_cpu"));
  std::string why_not;
  const auto location = find_sequence_counter(LibraryIndex(elf), &why_not);
  ASSERT_TRUE(location.has_value()) << why_not;
  EXPECT_EQ(location->tls_index_address, expected.tls_index_address);
  EXPECT_EQ(location->field_offset, expected.field_offset);
}

TEST(SequenceCounter, Torch113IsAtTheStartOfItsTlsVariable) {
  // 1.13: `data16 lea 0x64b265c(%rip),%rdi` -> 0x7242ac8 (an R_X86_64_DTPMOD64 slot);
  // `mov (%rax),%rax`.
  expect_location({testing::debian_torch113(), 0x7242ac8, 0});
}

TEST(SequenceCounter, Torch26IsInsideAThreadLocalBlock) {
  // 2.6: `lea 0xdfe6831(%rip),%rdi` -> 0xfa992b0; `mov 0x130(%rax),%rax`.
  expect_location({testing::trixie_torch26(), 0xfa992b0, 0x130});
}

TEST(SequenceCounter, RefusesALibraryWithoutPeek) {
  if (const auto missing = testing::debian_torch113().missing("libc10")) GTEST_SKIP() << *missing;
  const ElfFile elf(testing::debian_torch113().library("libc10"));
  std::string why_not;
  EXPECT_FALSE(find_sequence_counter(LibraryIndex(elf), &why_not).has_value());
  EXPECT_NE(why_not.find("peek"), std::string::npos) << why_not;
}

}  // namespace
}  // namespace tprof::symbolizer
