#include "symbolizer/aten/op_catalog.h"

#include <elf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "symbolizer/aten/argument_kinds.h"
#include "symbolizer/binary/elf_file.h"
#include "symbolizer/aten/op_symbols.h"
#include "symbolizer/aten/schema_scanner.h"
#include "tests/support/test_environment.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;
using namespace std::string_literals;

// Debian trixie's torch 2.6, unpacked by the project's setup into a separate root; the marker file
// appears once the unpacking has finished.
const fs::path kTrixieRoot = testing::trixie_root();
const fs::path kTrixieFinishedMarker = kTrixieRoot / ".tprof-complete";
const fs::path kTrixieLibtorchCpu = kTrixieRoot / "usr/lib/x86_64-linux-gnu/libtorch_cpu.so.2.6";

const OpCatalogEntry* find_entry(const OpCatalog& catalog, std::string_view unambiguous_name) {
  auto found = std::lower_bound(catalog.entries.begin(), catalog.entries.end(), unambiguous_name,
                                [](const OpCatalogEntry& entry, std::string_view name) {
                                  return entry.site.unambiguous_name < name;
                                });
  if (found == catalog.entries.end() || found->site.unambiguous_name != unambiguous_name) {
    return nullptr;
  }
  return &*found;
}

std::string catch_message(const std::string& path) {
  try {
    build_op_catalog(path);
  } catch (const std::runtime_error& error) {
    return error.what();
  }
  return "(no exception)";
}

// ---- the mangled call symbols ------------------------------------------------------------

TEST(OpNameOfCallSymbol, ReadsTheLengthPrefixedStructName) {
  EXPECT_EQ(op_name_of_call_symbol("_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE"),
            "add_Tensor");
  EXPECT_EQ(op_name_of_call_symbol("_ZN2at4_ops14__and___Tensor4callERKNS_6TensorES4_"),
            "__and___Tensor");
  EXPECT_EQ(op_name_of_call_symbol("_ZN2at4_ops2mm4callERKNS_6TensorES4_"), "mm");
}

TEST(OpNameOfCallSymbol, RejectsEverythingElse) {
  EXPECT_EQ(op_name_of_call_symbol(
                "_ZN2at4_ops2mm10redispatchEN3c1014DispatchKeySetERKNS_6TensorES6_"),
            std::nullopt);
  EXPECT_EQ(op_name_of_call_symbol("_ZN2at6native2mm4callERKNS_6TensorES4_"), std::nullopt);
  // A length that does not end where "4call" begins, runs past the end, or has a leading zero.
  EXPECT_EQ(op_name_of_call_symbol("_ZN2at4_ops3mm4callERKNS_6TensorES4_"), std::nullopt);
  EXPECT_EQ(op_name_of_call_symbol("_ZN2at4_ops99mm4callE"), std::nullopt);
  EXPECT_EQ(op_name_of_call_symbol("_ZN2at4_ops02mm4callE"), std::nullopt);
  // A nested name that goes on past "call".
  EXPECT_EQ(op_name_of_call_symbol("_ZN2at4_ops2mm4call6helperEv"), std::nullopt);
}

// ---- argument kinds ------------------------------------------------------------------------

constexpr ArgumentKind kT = ArgumentKind::kTensor;
constexpr ArgumentKind kL = ArgumentKind::kTensorList;
constexpr ArgumentKind kO = ArgumentKind::kOther;
using Kinds = std::vector<ArgumentKind>;

TEST(ArgumentKinds, FromSchemaText) {
  EXPECT_EQ(
      schema_argument_kinds("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"),
      (Kinds{kT, kT, kO}));
  EXPECT_EQ(schema_argument_kinds("sin(Tensor[] self) -> Tensor[]"), (Kinds{kL}));
  EXPECT_EQ(schema_argument_kinds("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor"),
            (Kinds{kT, kL}));
  // An alias annotation with a space and a ">" inside: still one argument.
  EXPECT_EQ(schema_argument_kinds(
                "split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]"),
            (Kinds{kT, kO, kO}));
  EXPECT_EQ(schema_argument_kinds("erf.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"),
            (Kinds{kT, kT}));
  EXPECT_EQ(schema_argument_kinds("conv2d(Tensor input, int[2] stride=[1, 1]) -> Tensor"),
            (Kinds{kT, kO}));
  EXPECT_EQ(schema_argument_kinds("_foo() -> ()"), Kinds{});
  EXPECT_EQ(schema_argument_kinds("broken(Tensor self"), std::nullopt);
}

// What --memory-timeline's data flow takes as written in place: an alias annotation with "!".
TEST(ArgumentKinds, WrittenArgumentsFromSchemaText) {
  using Written = std::vector<bool>;
  EXPECT_EQ(written_arguments("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"),
            (Written{true, false, false}));
  EXPECT_EQ(written_arguments("erf.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"), (Written{false, true}));
  EXPECT_EQ(written_arguments("_foreach_add_.List(Tensor(a!)[] self, Tensor[] other, *, Scalar alpha=1) -> ()"),
            (Written{true, false, false}));
  EXPECT_EQ(written_arguments("detach(Tensor(a) self) -> Tensor(a)"), (Written{false})) << "an alias, not a write";
  EXPECT_EQ(written_arguments("broken(Tensor(a!) self"), Written{}) << "unknown: no argument list";
}

TEST(ArgumentKinds, FromCallSymbol) {
  EXPECT_EQ(call_parameter_kinds("_ZN2at4_ops10add_Tensor4callERKNS_6TensorES4_RKN3c106ScalarE"),
            (Kinds{kT, kT, kO}));
  EXPECT_EQ(call_parameter_kinds("_ZN2at4_ops12_foreach_sin4callEN3c108ArrayRefINS_6TensorEEE"),
            (Kinds{kL}));
  EXPECT_EQ(call_parameter_kinds("_ZN2at4_ops3cat4callERKN3c108IListRefINS_6TensorEEEl"),
            (Kinds{kL, kO}));
  EXPECT_EQ(call_parameter_kinds(
                "_ZN2at4_ops12index_Tensor4callERKNS_6TensorERKN3c104ListINS5_8optionalIS2_EEEE"),
            (Kinds{kT, kL}));
  EXPECT_EQ(call_parameter_kinds("_ZN2at4_ops7erf_out4callERKNS_6TensorERS2_"), (Kinds{kT, kT}));
  EXPECT_EQ(call_parameter_kinds("not a mangled name"), std::nullopt);
}

// ---- the schema scanner on synthetic bytes ----------------------------------------------------

std::optional<SchemaCandidate> only_candidate(const SchemaIndex& index, std::string_view name) {
  std::span<const SchemaCandidate> found = index.find(name);
  if (found.size() != 1) return std::nullopt;
  return found.front();
}

class SchemaScannerTest : public ::testing::Test {
 protected:
  void SetUp() override { index_.scan(bytes_); }

  // What a linked .rodata looks like: NUL-terminated strings, binary data between them, and
  // strings that the linker merged into the tail of a longer one.
  const std::string bytes_ =
      "\x01\x02garbage("s + '\0' +
      "acos(Tensor self) -> Tensor" + '\0' +                      // also holds cos(...), os(...)
      "view_as_real(Tensor(a) self) -> Tensor(a)" + '\0' +        // also holds real(...)
      "isreal(Tensor self) -> Tensor" + '\0' +                    // a real(...) by coincidence
      "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" + '\0' +
      "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" + '\0' +
      "quantized::add(Tensor qa, Tensor qb, float scale, int zero_point) -> Tensor qc" + '\0' +
      "abs.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)" + '\0' +
      "expected mm(Tensor self, Tensor mat2) -> Tensor here" + '\0' +
      "def shape(x: List[int]) -> List[int]:\n  return x" + '\0' +
      "\xff\xfenarrow(Tensor self) -> Tensor" + '\0' +
      "unbalanced(Tensor self) -> (Tensor" + '\0' +
      "sum(Tensor self) -> Tensor";  // the last string of a section needs no NUL

  SchemaIndex index_;
};

TEST_F(SchemaScannerTest, FindsWholeStringsAsRegistrationLiterals) {
  std::optional<SchemaCandidate> acos = only_candidate(index_, "acos");
  ASSERT_TRUE(acos);
  EXPECT_EQ(acos->text, "acos(Tensor self) -> Tensor");
  EXPECT_EQ(acos->evidence, kRegistrationLiteral | kNameStartsWord);

  std::optional<SchemaCandidate> sum = only_candidate(index_, "sum");
  ASSERT_TRUE(sum);
  EXPECT_EQ(sum->text, "sum(Tensor self) -> Tensor");
}

TEST_F(SchemaScannerTest, FindsSchemasStoredOnlyAsTheTailOfAnother) {
  std::optional<SchemaCandidate> cos = only_candidate(index_, "cos");
  ASSERT_TRUE(cos);
  EXPECT_EQ(cos->text, "cos(Tensor self) -> Tensor");
  EXPECT_EQ(cos->evidence, kTailOfLiteral);  // mid-word: no kNameStartsWord
  ASSERT_TRUE(only_candidate(index_, "os"));

  // Both the genuine tail and the coincidental one are found; only the first starts a word.
  std::span<const SchemaCandidate> real = index_.find("real");
  ASSERT_EQ(real.size(), 2u);
  EXPECT_EQ(real[0].text, "real(Tensor(a) self) -> Tensor(a)");
  EXPECT_EQ(real[0].evidence, kTailOfLiteral | kNameStartsWord);
  EXPECT_EQ(real[1].text, "real(Tensor self) -> Tensor");
  EXPECT_EQ(real[1].evidence, kTailOfLiteral);
}

TEST_F(SchemaScannerTest, MergesWhereTheSameTextWasSeenAndStripsTheAtenNamespace) {
  std::optional<SchemaCandidate> add = only_candidate(index_, "add.Tensor");
  ASSERT_TRUE(add);
  EXPECT_EQ(add->text, "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  EXPECT_EQ(add->evidence, kRegistrationLiteral | kAtenQualified | kNameStartsWord);
}

TEST_F(SchemaScannerTest, IgnoresOtherNamespacesButKeepsTheirTails) {
  EXPECT_TRUE(index_.find("add").empty());  // quantized::add is not aten::add
  std::optional<SchemaCandidate> dd = only_candidate(index_, "dd");
  ASSERT_TRUE(dd);
  EXPECT_EQ(dd->evidence, kTailOfQualified);
}

TEST_F(SchemaScannerTest, KeepsSchemasInsideOtherTextAsWeakEvidence) {
  std::optional<SchemaCandidate> mm = only_candidate(index_, "mm");
  ASSERT_TRUE(mm);
  EXPECT_EQ(mm->text, "mm(Tensor self, Tensor mat2) -> Tensor here");
  EXPECT_EQ(mm->evidence, kEmbedded | kNameStartsWord);
}

TEST_F(SchemaScannerTest, RejectsWhatIsNotASchema) {
  // "Tensor(a!) out) -> ..." is an argument; the only "Tensor" is the tail of "add.Tensor(...)".
  for (const SchemaCandidate& tensor : index_.find("Tensor")) {
    EXPECT_TRUE(tensor.text.starts_with("Tensor(Tensor self, Tensor other")) << tensor.text;
  }
  EXPECT_TRUE(index_.find("shape").empty());       // TorchScript source spans lines
  EXPECT_TRUE(index_.find("garbage").empty());     // no ") -> "
  EXPECT_TRUE(index_.find("unbalanced").empty());  // returns never close
  EXPECT_TRUE(index_.find("abs").empty());         // the overload is part of the name
  EXPECT_TRUE(only_candidate(index_, "abs.out"));
}

TEST_F(SchemaScannerTest, TextRightAfterBinaryBytesIsNotAStringStart) {
  std::optional<SchemaCandidate> narrow = only_candidate(index_, "narrow");
  ASSERT_TRUE(narrow);
  EXPECT_EQ(narrow->text, "narrow(Tensor self) -> Tensor");
  EXPECT_EQ(narrow->evidence, kEmbedded | kNameStartsWord);
}

// ---- errors -----------------------------------------------------------------------------------

TEST(BuildOpCatalogErrors, MissingFile) {
  std::string message = catch_message("/nonexistent/libtorch_cpu.so");
  EXPECT_EQ(message, "cannot open /nonexistent/libtorch_cpu.so: No such file or directory");
}

TEST(BuildOpCatalogErrors, NotAnElfFile) {
  fs::path path = fs::temp_directory_path() / ("tprof_not_elf_" + std::to_string(getpid()));
  std::ofstream(path) << "just text, not an ELF object\n";
  std::string message = catch_message(path.string());
  fs::remove(path);
  EXPECT_EQ(message, path.string() + " is not an ELF file");
}

TEST(BuildOpCatalogErrors, ElfWithoutOps) {
  EXPECT_EQ(catch_message("/bin/ls"),
            "no at::_ops::*::call symbols in /bin/ls: not a libtorch_cpu?");
}

// ---- the real libraries -----------------------------------------------------------------------

// Where each PT_LOAD segment of a 64-bit little-endian ELF file maps, read with plain <elf.h>
// structs: an account of file offsets independent of libelf and of the section headers.
std::optional<uint64_t> file_offset_via_program_headers(std::ifstream& file, uint64_t address) {
  Elf64_Ehdr header{};
  file.seekg(0);
  file.read(reinterpret_cast<char*>(&header), sizeof header);
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    file.seekg(static_cast<std::streamoff>(header.e_phoff + i * header.e_phentsize));
    file.read(reinterpret_cast<char*>(&segment), sizeof segment);
    if (segment.p_type == PT_LOAD && address >= segment.p_vaddr &&
        address < segment.p_vaddr + segment.p_filesz) {
      return address - segment.p_vaddr + segment.p_offset;
    }
  }
  return std::nullopt;
}

void expect_offsets_match_program_headers(const OpCatalog& catalog, const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  ASSERT_TRUE(file) << path;
  size_t mismatches = 0;
  for (const OpCatalogEntry& entry : catalog.entries) {
    const uint64_t address = entry.site.symbol_address;
    if (file_offset_via_program_headers(file, address) != entry.site.file_offset) {
      ++mismatches;
      ADD_FAILURE() << entry.site.mangled_symbol << ": file offset " << entry.site.file_offset;
      if (mismatches > 5) return;
    }
  }
}

void expect_every_site_distinct_and_sorted(const OpCatalog& catalog) {
  std::map<uint64_t, std::string> by_address;
  for (size_t i = 0; i < catalog.entries.size(); ++i) {
    const OpCallSite& site = catalog.entries[i].site;
    EXPECT_TRUE(by_address.emplace(site.symbol_address, site.mangled_symbol).second)
        << site.mangled_symbol << " shares its address with " << by_address[site.symbol_address];
    if (i > 0) {
      EXPECT_LT(catalog.entries[i - 1].site.unambiguous_name, site.unambiguous_name);
    }
    EXPECT_TRUE(site.mangled_symbol.starts_with("_ZN2at4_ops")) << site.mangled_symbol;
  }
}

struct ExpectedOp {
  std::string unambiguous_name;
  std::string op_name;
  std::string overload;
  std::string schema;
};

void expect_ops(const OpCatalog& catalog, const std::vector<ExpectedOp>& expected_ops) {
  for (const ExpectedOp& expected : expected_ops) {
    const OpCatalogEntry* entry = find_entry(catalog, expected.unambiguous_name);
    ASSERT_NE(entry, nullptr) << expected.unambiguous_name;
    EXPECT_EQ(entry->op_name, expected.op_name) << expected.unambiguous_name;
    EXPECT_EQ(entry->overload, expected.overload) << expected.unambiguous_name;
    EXPECT_EQ(entry->schema, expected.schema) << expected.unambiguous_name;
  }
}

// ---- a synthetic library -----------------------------------------------------------------

// A tiny x86-64 shared object written with libelf. Its sections sit at file offsets 0x1000 below
// their addresses (as lld lays out .text; Debian's libtorch_cpu has offset == address), and it has
// both a .dynsym and a .symtab, like an unstripped build.
class SyntheticLibrary : public ::testing::Test {
 protected:
  static constexpr uint64_t kTextAddress = 0x1100;
  static constexpr uint64_t kAddressMinusOffset = 0x1000;
  static constexpr size_t kTextSize = 0x40;

  static char text_byte(size_t index) { return static_cast<char>(index ^ 0x5a); }

  void SetUp() override {
    path_ = fs::temp_directory_path() / ("tprof_synthetic_" + std::to_string(getpid()) + ".so");
    write_library();
  }
  void TearDown() override { fs::remove(path_); }

  fs::path path_;

 private:
  struct Section {
    std::string name;
    Elf64_Word type = SHT_PROGBITS;
    Elf64_Xword flags = 0;
    Elf64_Addr address = 0;
    std::string bytes;
    Elf64_Word link = 0;
    Elf64_Xword entry_size = 0;
  };

  // Appends `text` and its NUL to a string table; returns where it starts.
  static Elf64_Word add_string(std::string& table, std::string_view text) {
    Elf64_Word at = static_cast<Elf64_Word>(table.size());
    table.append(text);
    table.push_back('\0');
    return at;
  }

  static void add_function(std::string& symbols, std::string& names, std::string_view name,
                           Elf64_Section section, Elf64_Addr address) {
    Elf64_Sym symbol{};
    symbol.st_name = add_string(names, name);
    symbol.st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC);
    symbol.st_shndx = section;
    symbol.st_value = address;
    symbol.st_size = 8;
    symbols.append(reinterpret_cast<const char*>(&symbol), sizeof symbol);
  }

  void write_library() {
    constexpr Elf64_Section kTextIndex = 1;
    const std::string kMm = "_ZN2at4_ops2mm4callERKNS_6TensorES4_";
    std::string text;
    for (size_t i = 0; i < kTextSize; ++i) text.push_back(text_byte(i));

    std::string dynamic_names(1, '\0');
    std::string dynamic_symbols(sizeof(Elf64_Sym), '\0');  // index 0: the null symbol
    add_function(dynamic_symbols, dynamic_names, kMm, kTextIndex, 0x1110);
    add_function(dynamic_symbols, dynamic_names, "_ZN2at4_ops3cos4callERKNS_6TensorE", kTextIndex,
                 0x1120);
    add_function(dynamic_symbols, dynamic_names, "_ZN2at4_ops3sin4callERKNS_6TensorE", kTextIndex,
                 0x1130);
    // Not call sites: an import, and redispatch.
    add_function(dynamic_symbols, dynamic_names, "_ZN2at4_ops3abs4callERKNS_6TensorE", SHN_UNDEF,
                 0);
    add_function(dynamic_symbols, dynamic_names,
                 "_ZN2at4_ops2mm10redispatchEN3c1014DispatchKeySetERKNS_6TensorES6_", kTextIndex,
                 0x1138);
    std::string static_names(1, '\0');
    std::string static_symbols(sizeof(Elf64_Sym), '\0');
    add_function(static_symbols, static_names, kMm, kTextIndex, 0x1110);  // listed in both
    add_function(static_symbols, static_names, "_ZN2at4_ops3tan4callERKNS_6TensorE", kTextIndex,
                 0x1118);

    std::vector<Section> sections = {
        {".text", SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, kTextAddress, text},
        // cos(...) only as the tail of another string; tan's only schema has a tensor list where
        // its call symbol takes a tensor; sin has none at all.
        {".rodata", SHT_PROGBITS, SHF_ALLOC, 0x2140,
         "xcos(Tensor self) -> Tensor\0mm(Tensor self, Tensor mat2) -> Tensor\0"
         "tan(Tensor[] self) -> Tensor[]"s},
        {".dynstr", SHT_STRTAB, SHF_ALLOC, 0, dynamic_names},
        {".dynsym", SHT_DYNSYM, SHF_ALLOC, 0, dynamic_symbols, 3, sizeof(Elf64_Sym)},
        {".strtab", SHT_STRTAB, 0, 0, static_names},
        {".symtab", SHT_SYMTAB, 0, 0, static_symbols, 5, sizeof(Elf64_Sym)},
        {".shstrtab", SHT_STRTAB, 0, 0, ""},
    };
    std::string& section_names = sections.back().bytes;
    section_names.push_back('\0');
    std::vector<Elf64_Word> name_offsets;
    for (const Section& section : sections) {
      name_offsets.push_back(add_string(section_names, section.name));
    }

    ASSERT_NE(elf_version(EV_CURRENT), EV_NONE);
    struct FileDescriptor {
      int fd;
      ~FileDescriptor() { close(fd); }
    } file{open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
    ASSERT_GE(file.fd, 0);
    std::unique_ptr<Elf, decltype(&elf_end)> elf(elf_begin(file.fd, ELF_C_WRITE, nullptr),
                                                 &elf_end);
    ASSERT_TRUE(elf);
    elf_flagelf(elf.get(), ELF_C_SET, ELF_F_LAYOUT);  // this code, not libelf, places sections
    ASSERT_NE(gelf_newehdr(elf.get(), ELFCLASS64), nullptr);

    uint64_t offset = 0x100;
    for (size_t i = 0; i < sections.size(); ++i) {
      Section& section = sections[i];
      Elf_Scn* scn = elf_newscn(elf.get());
      Elf_Data* data = elf_newdata(scn);
      data->d_buf = section.bytes.data();
      data->d_size = section.bytes.size();
      data->d_type = ELF_T_BYTE;
      data->d_align = 1;
      data->d_version = EV_CURRENT;
      offset = (offset + 7) & ~uint64_t{7};
      if (section.address != 0) offset = section.address - kAddressMinusOffset;
      GElf_Shdr header{};
      header.sh_name = name_offsets[i];
      header.sh_type = section.type;
      header.sh_flags = section.flags;
      header.sh_addr = section.address;
      header.sh_offset = offset;
      header.sh_size = section.bytes.size();
      header.sh_link = section.link;
      header.sh_info = section.link == 0 ? 0 : 1;  // symbol tables: the first global symbol
      header.sh_addralign = 1;
      header.sh_entsize = section.entry_size;
      ASSERT_TRUE(gelf_update_shdr(scn, &header));
      offset += section.bytes.size();
    }

    GElf_Ehdr header{};
    ASSERT_NE(gelf_getehdr(elf.get(), &header), nullptr);
    header.e_ident[EI_DATA] = ELFDATA2LSB;
    header.e_type = ET_DYN;
    header.e_machine = EM_X86_64;
    header.e_version = EV_CURRENT;
    header.e_shoff = (offset + 7) & ~uint64_t{7};
    header.e_shstrndx = static_cast<Elf64_Half>(sections.size());
    ASSERT_TRUE(gelf_update_ehdr(elf.get(), &header));
    ASSERT_GE(elf_update(elf.get(), ELF_C_WRITE), 0) << elf_errmsg(-1);
  }
};

TEST_F(SyntheticLibrary, ReadsCallSitesFromBothSymbolTablesOnce) {
  OpCatalog catalog = build_op_catalog(path_.string());
  std::vector<std::string> names;
  for (const OpCatalogEntry& entry : catalog.entries) names.push_back(entry.site.unambiguous_name);
  EXPECT_EQ(names, (std::vector<std::string>{"cos", "mm", "sin", "tan"}));
}

TEST_F(SyntheticLibrary, TranslatesAddressesThroughTheSection) {
  OpCatalog catalog = build_op_catalog(path_.string());
  std::ifstream file(path_, std::ios::binary);
  for (const OpCatalogEntry& entry : catalog.entries) {
    const OpCallSite& site = entry.site;
    EXPECT_EQ(site.file_offset, site.symbol_address - kAddressMinusOffset) << site.mangled_symbol;
    char at_offset = 0;
    file.seekg(static_cast<std::streamoff>(site.file_offset));
    file.get(at_offset);
    EXPECT_EQ(at_offset, text_byte(site.symbol_address - kTextAddress)) << site.mangled_symbol;
  }
}

TEST_F(SyntheticLibrary, ResolvesWhatItCanAndNamesTheRestAfterTheSymbol) {
  OpCatalog catalog = build_op_catalog(path_.string());
  expect_ops(catalog, {
      {"cos", "aten::cos", "", "aten::cos(Tensor self) -> Tensor"},
      {"mm", "aten::mm", "", "aten::mm(Tensor self, Tensor mat2) -> Tensor"},
      {"sin", "aten::sin", "", ""},
      {"tan", "aten::tan", "", ""},
  });
  EXPECT_EQ(catalog.unresolved_count, 2u);
  EXPECT_TRUE(catalog.collisions.empty());
}

class Torch113Catalog : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (fs::exists(testing::debian_libtorch_cpu())) {
      catalog_ = new OpCatalog(build_op_catalog(testing::debian_libtorch_cpu()));
    }
  }
  static void TearDownTestSuite() {
    delete catalog_;
    catalog_ = nullptr;
  }
  void SetUp() override {
    if (catalog_ == nullptr) {
      GTEST_SKIP() << "SKIPPED LOUDLY: " << testing::debian_libtorch_cpu()
                   << " is missing; install Debian's libtorch1.13 (python3-torch) to run this";
    }
  }
  static inline OpCatalog* catalog_ = nullptr;
};

TEST_F(Torch113Catalog, MapsEveryCallSymbolToASchema) {
  EXPECT_EQ(catalog_->entries.size(), 2952u);
  EXPECT_EQ(catalog_->unresolved_count, 0u);
  for (const OpCatalogEntry& entry : catalog_->entries) {
    EXPECT_FALSE(entry.schema.empty()) << entry.site.unambiguous_name;
  }
  expect_every_site_distinct_and_sorted(*catalog_);
}

TEST_F(Torch113Catalog, KnownMappings) {
  expect_ops(*catalog_, {
      {"add_Tensor", "aten::add", "Tensor",
       "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"},
      {"add__Tensor", "aten::add_", "Tensor",
       "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"},
      {"__and___Tensor", "aten::__and__", "Tensor",
       "aten::__and__.Tensor(Tensor self, Tensor other) -> Tensor"},
      // Its registration literal survives only as the tail of acos's.
      {"cos", "aten::cos", "", "aten::cos(Tensor self) -> Tensor"},
      {"_foreach_add__Scalar", "aten::_foreach_add_", "Scalar",
       "aten::_foreach_add_.Scalar(Tensor(a!)[] self, Scalar scalar) -> ()"},
      {"mm", "aten::mm", "", "aten::mm(Tensor self, Tensor mat2) -> Tensor"},
      {"sum_dim_IntList", "aten::sum", "dim_IntList",
       "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, "
       "ScalarType? dtype=None) -> Tensor"},
      // The signature rules out "erf.out(Tensor[] self, ...)", the tail of _foreach_erf.out.
      {"erf_out", "aten::erf", "out",
       "aten::erf.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)"},
      // Stronger evidence beats "conj(Tensor self) -> bool", the tail of is_conj's schema.
      {"conj", "aten::conj", "", "aten::conj(Tensor(a) self) -> Tensor(a)"},
  });
}

TEST_F(Torch113Catalog, HasNoCollisions) {
  // Every ambiguity on 1.13 is settled by the call signature or clearly stronger evidence.
  EXPECT_EQ(catalog_->collisions, std::vector<std::string>{});
}

TEST_F(Torch113Catalog, FileOffsetsMatchTheLoadSegments) {
  expect_offsets_match_program_headers(*catalog_, testing::debian_libtorch_cpu());
}

TEST_F(Torch113Catalog, FileOffsetsHoldTheFunctionsCode) {
  // The bytes at file_offset are those libelf reports at the symbol's address in .text.
  const OpCatalogEntry* add = find_entry(*catalog_, "add_Tensor");
  ASSERT_NE(add, nullptr);
  std::ifstream file(testing::debian_libtorch_cpu(), std::ios::binary);
  std::string at_offset(16, '\0');
  file.seekg(static_cast<std::streamoff>(add->site.file_offset));
  file.read(at_offset.data(), static_cast<std::streamsize>(at_offset.size()));

  ElfFile elf(testing::debian_libtorch_cpu());
  std::string in_text;
  elf.for_each_section([&](const ElfSection& section) {
    const uint64_t address = add->site.symbol_address;
    if (section.header.sh_type == SHT_PROGBITS && address >= section.header.sh_addr &&
        address < section.header.sh_addr + section.header.sh_size) {
      in_text = elf.section_bytes(section).substr(address - section.header.sh_addr, 16);
    }
  });
  EXPECT_EQ(at_offset, in_text);
}

class Torch26Catalog : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (fs::exists(kTrixieFinishedMarker) && fs::exists(kTrixieLibtorchCpu)) {
      catalog_ = new OpCatalog(build_op_catalog(kTrixieLibtorchCpu.string()));
    }
  }
  static void TearDownTestSuite() {
    delete catalog_;
    catalog_ = nullptr;
  }
  void SetUp() override {
    if (catalog_ == nullptr) {
      GTEST_SKIP() << "SKIPPED LOUDLY: torch 2.6 is not checked: the trixie root is absent or "
                   << "still being unpacked (no " << kTrixieFinishedMarker.string()
                   << "), or it has no " << kTrixieLibtorchCpu.string();
    }
  }
  static inline OpCatalog* catalog_ = nullptr;
};

TEST_F(Torch26Catalog, MapsEveryCallSymbolToASchema) {
  // 3144 call symbols; the same number of redispatch symbols makes 6288 at::_ops functions.
  EXPECT_EQ(catalog_->entries.size(), 3144u);
  EXPECT_EQ(catalog_->unresolved_count, 0u);
  expect_every_site_distinct_and_sorted(*catalog_);
}

TEST_F(Torch26Catalog, KnownMappings) {
  expect_ops(*catalog_, {
      {"add_Tensor", "aten::add", "Tensor",
       "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"},
      {"cos", "aten::cos", "", "aten::cos(Tensor self) -> Tensor"},
      {"mm", "aten::mm", "", "aten::mm(Tensor self, Tensor mat2) -> Tensor"},
      {"real", "aten::real", "", "aten::real(Tensor(a) self) -> Tensor(a)"},
  });
}

TEST_F(Torch26Catalog, ReportsTheOneCloseCall) {
  // real's literal survives only inside view_as_real's, and isreal's holds a same-signature
  // "real(Tensor self) -> Tensor": told apart only by where the name starts a word.
  EXPECT_EQ(catalog_->collisions,
            std::vector<std::string>{
                "real: chose aten::real(Tensor(a) self) -> Tensor(a); also matched: "
                "aten::real(Tensor self) -> Tensor"});
}

TEST_F(Torch26Catalog, FileOffsetsMatchTheLoadSegments) {
  expect_offsets_match_program_headers(*catalog_, kTrixieLibtorchCpu.string());
}

}  // namespace
}  // namespace tprof::symbolizer
