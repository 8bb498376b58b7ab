// The plan cache on disk (userspace/session/plan_cache.h): an entry is read back only when it
// is whole, for this very library build and tprof build, and in a directory and file only root
// or tprof's user could have written; anything else is said in one line, planned again and
// rewritten. A plan read back equals the plan made, field by field (on the real libtorch_cpu
// where it is installed).
#include "userspace/session/plan_cache.h"

#include <elf.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/support/process_harness.h"
#include "tests/support/torch_libraries.h"
#include "userspace/session/plan_bytes.h"
#include "userspace/session/plan_serialization.h"

namespace tprof {
namespace {

namespace fs = std::filesystem;

constexpr uid_t kNobody = 65534;
const std::string kBuildId(20, '\xa1');
const std::string kOtherBuildId(20, '\xb2');

// A 64-bit ELF file that is only its header, one PT_NOTE program header and the build-id
// note: all the cache reads of a library.
void write_library(const fs::path& path, const std::string& build_id) {
  Elf64_Ehdr header{};
  std::memcpy(header.e_ident, ELFMAG, SELFMAG);
  header.e_ident[EI_CLASS] = ELFCLASS64;
  header.e_ident[EI_DATA] = ELFDATA2LSB;
  header.e_ident[EI_VERSION] = EV_CURRENT;
  header.e_type = ET_DYN;
  header.e_machine = EM_X86_64;
  header.e_version = EV_CURRENT;
  header.e_phoff = sizeof(Elf64_Ehdr);
  header.e_ehsize = sizeof(Elf64_Ehdr);
  header.e_phentsize = sizeof(Elf64_Phdr);
  header.e_phnum = 1;
  const Elf64_Nhdr note{4, static_cast<Elf64_Word>(build_id.size()), NT_GNU_BUILD_ID};
  Elf64_Phdr segment{};
  segment.p_type = PT_NOTE;
  segment.p_offset = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr);
  segment.p_filesz = sizeof(note) + 4 + build_id.size();
  segment.p_align = 4;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&header), sizeof(header));
  out.write(reinterpret_cast<const char*>(&segment), sizeof(segment));
  out.write(reinterpret_cast<const char*>(&note), sizeof(note));
  out.write("GNU", 4);
  out << build_id;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A plan with something in every field.
TorchLibraryPlan small_plan() {
  TorchLibraryPlan plan;
  plan.plan.sites = {"", {0x1000, 0x2000}, {0, 1}};
  plan.plan.addresses = {0x401000, 0x402000};
  plan.plan.operators = {{"aten::add", "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"},
                         {"detach", "", model::RangeKind::kOperator}};
  plan.plan.catalog_entries = {7};
  plan.plan.shared_address_skipped = 3;
  symbolizer::OpArgumentPlan add;
  add.inputs = {{"self", "Tensor", "at::Tensor const&", {READ_TENSOR, 0, {LOCATION_REGISTER, 1}, {}, 0}, std::nullopt},
                {"alpha", "float", "double", {READ_WORD, 0, {LOCATION_FRAME_POINTER_SLOT, 6}, {}, -24}, 2u}};
  add.return_types = {"Tensor"};
  add.bpf.argument_count = 2;
  add.bpf.output_read = OUTPUT_TENSOR;
  add.bpf.arguments[0] = add.inputs[0].bpf;
  add.bpf.arguments[1] = add.inputs[1].bpf;
  add.partial_reason = "from argument 3 on";
  plan.argument_plans = {add};
  plan.spills = {{"", {0x1010}, {0}}, 1, {1}};
  plan.no_arguments_why = "";
  plan.returns = {.offsets = {0x1100, 0x2100, 0x2100}, .functions = {0, 0, 1}};
  auto ranges = std::make_shared<RangeSites>();
  ranges->annotations = {{0x3000, 0x3080}, 0x3100, 0x3200, "two kernels"};
  ranges->autograd.evaluate_function = 0x4000;
  ranges->autograd.evaluate_function_address = 0x404000;
  ranges->autograd.apply_sites = {{"MmBackward0", 0x4100, 0x404100}};
  ranges->autograd.sequence_nr_offset = 72;
  ranges->autograd.source = "found";
  ranges->vtables.emplace(std::vector<symbolizer::VtableNames::Object>{
      {0x5000, 0x40, "_ZTVN5torch8autograd9generated11MmBackward0E"}, {0x5040, 8, ""}});
  ranges->sequence_counter = symbolizer::SequenceCounterLocation{0x6000, 16};
  plan.ranges = std::move(ranges);
  plan.notes = {"3 ops share their code with another op and are recorded under its name"};
  return plan;
}

// Field by field, so that a difference names its field.
void expect_same(const UprobeSites& a, const UprobeSites& b, const std::string& what) {
  EXPECT_EQ(a.binary_path, b.binary_path) << what;
  EXPECT_EQ(a.offsets, b.offsets) << what;
  EXPECT_EQ(a.cookies, b.cookies) << what;
}

void expect_same(const argument_plan& a, const argument_plan& b) {
  EXPECT_EQ(a.read, b.read);
  EXPECT_EQ(a.reserved, b.reserved);
  EXPECT_EQ(a.word.kind, b.word.kind);
  EXPECT_EQ(a.word.index, b.word.index);
  EXPECT_EQ(a.length.kind, b.length.kind);
  EXPECT_EQ(a.length.index, b.length.index);
  EXPECT_EQ(a.displacement, b.displacement);
}

void expect_same(const op_plan& a, const op_plan& b) {
  EXPECT_EQ(a.argument_count, b.argument_count);
  EXPECT_EQ(a.output_read, b.output_read);
  EXPECT_EQ(a.output_count, b.output_count);
  EXPECT_EQ(a.output_word_mask, b.output_word_mask);
  EXPECT_EQ(0, std::memcmp(a.reserved, b.reserved, sizeof(a.reserved)));
  for (size_t i = 0; i < OP_PLAN_ARGUMENTS_MAX; ++i) {
    SCOPED_TRACE("bpf argument " + std::to_string(i));
    expect_same(a.arguments[i], b.arguments[i]);
  }
}

void expect_same(const symbolizer::OpArgumentPlan& a, const symbolizer::OpArgumentPlan& b) {
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    SCOPED_TRACE("input " + std::to_string(i));
    EXPECT_EQ(a.inputs[i].name, b.inputs[i].name);
    EXPECT_EQ(a.inputs[i].schema_type, b.inputs[i].schema_type);
    EXPECT_EQ(a.inputs[i].cxx_type, b.inputs[i].cxx_type);
    expect_same(a.inputs[i].bpf, b.inputs[i].bpf);
    EXPECT_EQ(a.inputs[i].xmm_register, b.inputs[i].xmm_register);
  }
  EXPECT_EQ(a.return_types, b.return_types);
  expect_same(a.bpf, b.bpf);
  EXPECT_EQ(a.unplanned_reason, b.unplanned_reason);
  EXPECT_EQ(a.partial_reason, b.partial_reason);
}

void expect_same(const RangeSites& a, const RangeSites& b) {
  EXPECT_EQ(a.annotations.enter_functions, b.annotations.enter_functions);
  EXPECT_EQ(a.annotations.user_scope_constructor, b.annotations.user_scope_constructor);
  EXPECT_EQ(a.annotations.end, b.annotations.end);
  EXPECT_EQ(a.annotations.source, b.annotations.source);
  EXPECT_EQ(a.autograd.evaluate_function, b.autograd.evaluate_function);
  EXPECT_EQ(a.autograd.evaluate_function_address, b.autograd.evaluate_function_address);
  ASSERT_EQ(a.autograd.apply_sites.size(), b.autograd.apply_sites.size());
  for (size_t i = 0; i < a.autograd.apply_sites.size(); ++i) {
    EXPECT_EQ(a.autograd.apply_sites[i].class_name, b.autograd.apply_sites[i].class_name) << i;
    EXPECT_EQ(a.autograd.apply_sites[i].file_offset, b.autograd.apply_sites[i].file_offset) << i;
    EXPECT_EQ(a.autograd.apply_sites[i].address, b.autograd.apply_sites[i].address) << i;
  }
  EXPECT_EQ(a.autograd.sequence_nr_offset, b.autograd.sequence_nr_offset);
  EXPECT_EQ(a.autograd.thread_id_offset, b.autograd.thread_id_offset);
  EXPECT_EQ(a.autograd.source, b.autograd.source);
  ASSERT_EQ(a.vtables.has_value(), b.vtables.has_value());
  if (a.vtables) {
    EXPECT_TRUE(a.vtables->objects() == b.vtables->objects()) << "vtables";
  }
  ASSERT_EQ(a.sequence_counter.has_value(), b.sequence_counter.has_value());
  if (a.sequence_counter) {
    EXPECT_EQ(a.sequence_counter->tls_index_address, b.sequence_counter->tls_index_address);
    EXPECT_EQ(a.sequence_counter->field_offset, b.sequence_counter->field_offset);
  }
  EXPECT_EQ(a.no_sequence_counter_why, b.no_sequence_counter_why);
  EXPECT_EQ(a.annotations_found(), b.annotations_found());
  EXPECT_EQ(a.autograd_found(), b.autograd_found());
}

void expect_same(const TorchLibraryPlan& a, const TorchLibraryPlan& b) {
  expect_same(a.plan.sites, b.plan.sites, "op sites");
  EXPECT_EQ(a.plan.addresses, b.plan.addresses);
  ASSERT_EQ(a.plan.operators.size(), b.plan.operators.size());
  for (size_t i = 0; i < a.plan.operators.size(); ++i) {
    EXPECT_EQ(a.plan.operators[i].name, b.plan.operators[i].name) << i;
    EXPECT_EQ(a.plan.operators[i].schema, b.plan.operators[i].schema) << i;
    EXPECT_EQ(a.plan.operators[i].kind, b.plan.operators[i].kind) << i;
  }
  EXPECT_EQ(a.plan.catalog_entries, b.plan.catalog_entries);
  EXPECT_EQ(a.plan.shared_address_skipped, b.plan.shared_address_skipped);
  ASSERT_EQ(a.argument_plans.size(), b.argument_plans.size());
  for (size_t op_id = 0; op_id < a.argument_plans.size() && !::testing::Test::HasFailure(); ++op_id) {
    SCOPED_TRACE("argument plan of op " + std::to_string(op_id));
    expect_same(a.argument_plans[op_id], b.argument_plans[op_id]);
  }
  expect_same(a.spills.sites, b.spills.sites, "spill sites");
  EXPECT_EQ(a.spills.doubles_planned, b.spills.doubles_planned);
  EXPECT_EQ(a.spills.ops_with_unread_doubles, b.spills.ops_with_unread_doubles);
  EXPECT_EQ(a.no_arguments_why, b.no_arguments_why);
  EXPECT_EQ(a.returns.offsets, b.returns.offsets);
  EXPECT_EQ(a.returns.functions, b.returns.functions);
  ASSERT_TRUE(a.ranges && b.ranges);
  expect_same(*a.ranges, *b.ranges);
  EXPECT_EQ(a.notes, b.notes);
}

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  return text;
}

class PlanCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_library(library_, kBuildId);
    write_library(other_library_, kOtherBuildId);
  }

  // One session's cache: plans the library through it, counting the plans made.
  PlanCache::Result plan(const fs::path& library) {
    PlanCache cache(directory_);
    said_.clear();
    return cache.plan(
        library, /*record_shapes=*/true,
        [&] {
          ++made_;
          TorchLibraryPlan made = small_plan();
          made.plan.sites.binary_path = made.spills.sites.binary_path = library;
          return made;
        },
        [&](const std::string& line) { said_.push_back(line); });
  }

  fs::path entry_of(const fs::path& library) const {
    return directory_ / PlanCache::entry_name(library, /*record_shapes=*/true);
  }
  fs::path entry() const { return entry_of(library_); }

  // The entry made by a first attach.
  void cache_the_plan() {
    ASSERT_FALSE(plan(library_).from_cache);
    ASSERT_TRUE(fs::is_regular_file(entry())) << joined(said_);
  }

  // The next attach says `reason` in one line (returned), plans again and rewrites the entry,
  // which the one after reads back.
  std::string expect_refused_and_rewritten(const std::string& reason) {
    const int made_before = made_;
    EXPECT_FALSE(plan(library_).from_cache);
    EXPECT_EQ(made_, made_before + 1) << "planned again";
    EXPECT_EQ(said_.size(), 1u) << joined(said_);
    const std::string line = said_.empty() ? "" : said_.front();
    EXPECT_NE(line.find(reason), std::string::npos) << line;
    const PlanCache::Result again = plan(library_);
    EXPECT_TRUE(again.from_cache) << "the entry was rewritten: " << joined(said_);
    EXPECT_TRUE(said_.empty()) << joined(said_);
    EXPECT_EQ(made_, made_before + 1);
    return line;
  }

  // Rewrites the entry's payload (what follows its header) and the header's size and CRC, so
  // that only the payload is wrong.
  void replace_payload(const std::string& payload) {
    const std::string entry_bytes = read_file(entry());
    const size_t header = entry_bytes.size() - serialize_plan(small_plan()).size();
    std::string rewritten = entry_bytes.substr(0, header) + payload;
    const uint64_t size = payload.size();
    const auto crc = static_cast<uint32_t>(
        crc32_z(crc32_z(0, Z_NULL, 0), reinterpret_cast<const Bytef*>(payload.data()), payload.size()));
    std::memcpy(rewritten.data() + header - 12, &size, sizeof(size));  // little-endian host
    std::memcpy(rewritten.data() + header - 4, &crc, sizeof(crc));
    write_file(entry(), rewritten);
  }

  static void require_root() {
    if (::geteuid() != 0) GTEST_SKIP() << "SKIPPED LOUDLY: giving files to another user needs root";
  }

  test::ScratchDirectory scratch_;
  const fs::path library_ = scratch_.path() / "libtorch_cpu.so";
  const fs::path other_library_ = scratch_.path() / "libtorch_cpu.so.other";
  const fs::path directory_ = scratch_.path() / "cache" / "plans";
  int made_ = 0;
  std::vector<std::string> said_;
};

TEST_F(PlanCacheTest, TheSecondSessionReadsThePlanBackWithoutPlanning) {
  const PlanCache::Result first = plan(library_);
  EXPECT_FALSE(first.from_cache);
  EXPECT_TRUE(said_.empty()) << joined(said_);
  struct stat status{};
  ASSERT_EQ(::stat(directory_.c_str(), &status), 0) << "the directory is created";
  EXPECT_EQ(status.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat(entry().c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 07777, 0600u);

  const PlanCache::Result second = plan(library_);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(made_, 1);
  EXPECT_TRUE(said_.empty()) << joined(said_);
  expect_same(first.plan, second.plan);
  EXPECT_EQ(serialize_plan(second.plan), serialize_plan(small_plan()));
}

TEST_F(PlanCacheTest, EntriesAreNamedByBuildAndShapesSetting) {
  EXPECT_NE(PlanCache::entry_name(library_, true), PlanCache::entry_name(other_library_, true));
  EXPECT_NE(PlanCache::entry_name(library_, true), PlanCache::entry_name(library_, false));
  EXPECT_EQ(PlanCache::entry_name(library_, true).substr(0, 40), "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1");
}

TEST_F(PlanCacheTest, ATruncatedEntryIsPlannedAgainAndRewritten) {
  cache_the_plan();
  const std::string bytes = read_file(entry());
  write_file(entry(), bytes.substr(0, bytes.size() / 2));
  expect_refused_and_rewritten("is truncated");
}

TEST_F(PlanCacheTest, AnEntryCutInsideItsHeaderIsTruncated) {
  cache_the_plan();
  write_file(entry(), read_file(entry()).substr(0, 10));
  expect_refused_and_rewritten("is truncated");
}

TEST_F(PlanCacheTest, AnEntryOfAnotherLibraryBuildIsNotTrusted) {
  cache_the_plan();
  // The other build's entry under this build's name: its header names the other build-id.
  ASSERT_FALSE(plan(other_library_).from_cache);
  fs::copy_file(entry_of(other_library_), entry(), fs::copy_options::overwrite_existing);
  expect_refused_and_rewritten("is for another build of the library");
}

TEST_F(PlanCacheTest, AnEntryOfAnotherFormatVersionIsPlannedAgainWithoutAWarning) {
  cache_the_plan();
  std::string bytes = read_file(entry());
  const uint32_t other_version = PlanCache::kFormatVersion + 1;
  std::memcpy(bytes.data() + 8, &other_version, sizeof(other_version));  // after the magic
  write_file(entry(), bytes);
  const std::string line = expect_refused_and_rewritten("has format version " + std::to_string(other_version));
  EXPECT_EQ(line.find("warning"), std::string::npos) << "expected after an upgrade: " << line;
}

TEST_F(PlanCacheTest, AnUpgradedTprofDoesNotWarn) {
  cache_the_plan();
  std::string bytes = read_file(entry());
  bytes[8 + 4 + 4] ^= 1;  // the first byte of the writer's version
  write_file(entry(), bytes);
  const std::string line = expect_refused_and_rewritten("was written by another tprof build");
  EXPECT_EQ(line.find("warning"), std::string::npos) << line;
}

TEST_F(PlanCacheTest, AChangedPayloadFailsItsChecksum) {
  cache_the_plan();
  std::string bytes = read_file(entry());
  bytes[bytes.size() - 3] ^= 0x40;
  write_file(entry(), bytes);
  expect_refused_and_rewritten("fails its checksum");
}

TEST_F(PlanCacheTest, APayloadThatIsNoWholePlanIsMalformed) {
  cache_the_plan();
  std::string payload = serialize_plan(small_plan());
  replace_payload(payload.substr(0, payload.size() - 1));
  expect_refused_and_rewritten("is malformed");
}

TEST_F(PlanCacheTest, APlanWhoseOpIdsDisagreeIsMalformed) {
  cache_the_plan();
  TorchLibraryPlan inconsistent = small_plan();
  inconsistent.spills.sites.cookies = {5};  // no op 5
  replace_payload(serialize_plan(inconsistent));
  expect_refused_and_rewritten("a spill site names an op without a plan");
}

TEST_F(PlanCacheTest, AFileThatIsNoEntryIsNotRead) {
  cache_the_plan();
  write_file(entry(), std::string(4096, 'x'));
  expect_refused_and_rewritten("is not a tprof plan cache entry");
}

TEST_F(PlanCacheTest, AnEntryOwnedByAnotherUserIsNotTrusted) {
  require_root();
  cache_the_plan();
  ASSERT_EQ(::chown(entry().c_str(), kNobody, kNobody), 0);
  expect_refused_and_rewritten("is not trusted: it is owned by uid 65534");
  struct stat status{};
  ASSERT_EQ(::stat(entry().c_str(), &status), 0);
  EXPECT_EQ(status.st_uid, ::geteuid()) << "rewritten as tprof's";
}

TEST_F(PlanCacheTest, AnEntryOthersMayWriteIsNotTrusted) {
  cache_the_plan();
  ASSERT_EQ(::chmod(entry().c_str(), 0662), 0);
  expect_refused_and_rewritten("group or others may write it (mode 0662)");
}

TEST_F(PlanCacheTest, AnEntryThatIsASymbolicLinkIsNotFollowed) {
  cache_the_plan();
  const fs::path elsewhere = scratch_.path() / "elsewhere.plan";
  fs::rename(entry(), elsewhere);
  fs::create_symlink(elsewhere, entry());
  expect_refused_and_rewritten("is a symbolic link");
  EXPECT_FALSE(fs::is_symlink(entry())) << "replaced by a file, not written through";
  EXPECT_TRUE(fs::is_regular_file(elsewhere));
}

TEST_F(PlanCacheTest, AFifoInPlaceOfAnEntryDoesNotHang) {
  cache_the_plan();
  fs::remove(entry());
  ASSERT_EQ(::mkfifo(entry().c_str(), 0600), 0);
  expect_refused_and_rewritten("is not a regular file");
}

// The directory is checked before anything in it is read: refused, it is said once a session,
// and every plan is made afresh without being kept.
class UntrustedDirectoryTest : public PlanCacheTest {
 protected:
  void expect_directory_refused(const std::string& reason) {
    PlanCache cache(directory_);
    std::vector<std::string> said;
    const auto say = [&](const std::string& line) { said.push_back(line); };
    const auto make = [&] {
      ++made_;
      return small_plan();
    };
    EXPECT_FALSE(cache.plan(library_, true, make, say).from_cache);
    EXPECT_FALSE(cache.plan(library_, true, make, say).from_cache);
    EXPECT_EQ(made_, 2);
    ASSERT_EQ(said.size(), 1u) << "said once: " << joined(said);
    EXPECT_NE(said.front().find("warning: plan cache " + directory_.string() + " not used: " + reason),
              std::string::npos)
        << said.front();
    EXPECT_FALSE(fs::exists(entry())) << "nothing is kept there";
  }
};

TEST_F(UntrustedDirectoryTest, ADirectoryOthersMayWriteIsNotUsed) {
  fs::create_directories(directory_);
  ASSERT_EQ(::chmod(directory_.c_str(), 0777), 0);
  expect_directory_refused("group or others may write it (mode 0777)");
}

TEST_F(UntrustedDirectoryTest, AGroupWritableDirectoryIsNotUsed) {
  fs::create_directories(directory_);
  ASSERT_EQ(::chmod(directory_.c_str(), 0770), 0);
  expect_directory_refused("group or others may write it (mode 0770)");
}

TEST_F(UntrustedDirectoryTest, ADirectoryOwnedByAnotherUserIsNotUsed) {
  require_root();
  fs::create_directories(directory_);
  ASSERT_EQ(::chmod(directory_.c_str(), 0700), 0);
  ASSERT_EQ(::chown(directory_.c_str(), kNobody, kNobody), 0);
  expect_directory_refused("it is owned by uid 65534, neither root nor tprof's user");
}

TEST_F(UntrustedDirectoryTest, ADirectoryThatIsASymbolicLinkIsNotFollowed) {
  const fs::path real = scratch_.path() / "real-plans";
  fs::create_directories(real);
  ASSERT_EQ(::chmod(real.c_str(), 0700), 0);
  fs::create_directories(directory_.parent_path());
  fs::create_directory_symlink(real, directory_);
  expect_directory_refused("it is a symbolic link");
  EXPECT_TRUE(fs::is_empty(real));
}

// Every cut of a payload is refused as malformed, never read past its end.
TEST(PlanSerialization, EveryTruncationIsMalformed) {
  const std::string payload = serialize_plan(small_plan());
  for (size_t size = 0; size < payload.size(); ++size)
    EXPECT_THROW(deserialize_plan(std::string_view(payload).substr(0, size), "/lib"), MalformedBytes) << size;
  EXPECT_NO_THROW(deserialize_plan(payload, "/lib"));
}

TEST(PlanSerialization, ACountLargerThanTheBytesLeftIsMalformed) {
  std::string payload = serialize_plan(small_plan());
  payload[0] = payload[1] = payload[2] = payload[3] = '\xff';  // the op site count
  EXPECT_THROW(deserialize_plan(payload, "/lib"), MalformedBytes);
}

// The real libtorch_cpu: its plan read back from the cache equals the plan made, field by field.
class TorchPlanRoundTripTest : public ::testing::TestWithParam<testing::TorchInstall> {
 protected:
  void SetUp() override {
    if (const auto missing = GetParam().missing("libtorch_cpu")) GTEST_SKIP() << *missing;
  }
};

TEST_P(TorchPlanRoundTripTest, ACachedPlanEqualsAFreshPlan) {
  const std::string library = GetParam().library("libtorch_cpu");
  const MappedLibrary mapped{.path_in_target = library, .host_path = library, .load_address = 0x7f0000000000};
  test::ScratchDirectory scratch;
  for (const bool record_shapes : {true, false}) {
    SCOPED_TRACE(record_shapes ? "with shapes" : "without shapes");
    const auto make = [&] { return plan_torch_library(mapped, record_shapes); };
    std::vector<std::string> said;
    const auto say = [&](const std::string& line) { said.push_back(line); };
    PlanCache writer(scratch.path() / "plans");
    const PlanCache::Result fresh = writer.plan(library, record_shapes, make, say);
    ASSERT_FALSE(fresh.from_cache);
    PlanCache reader(scratch.path() / "plans");
    const PlanCache::Result cached = reader.plan(library, record_shapes, make, say);
    ASSERT_TRUE(cached.from_cache) << joined(said);
    EXPECT_TRUE(said.empty()) << joined(said);
    expect_same(fresh.plan, cached.plan);
    EXPECT_GT(cached.plan.plan.operators.size(), 1000u);
    EXPECT_EQ(cached.plan.argument_plans.empty(), !record_shapes);
  }
}

INSTANTIATE_TEST_SUITE_P(Torch, TorchPlanRoundTripTest,
                         ::testing::Values(testing::debian_torch113(), testing::trixie_torch26(), testing::sid_torch214()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace tprof
