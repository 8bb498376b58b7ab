// Code objects read out of memory: fake memory for every string kind and every way a pointer
// can be wrong, then live interpreters (each installed pyenv CPython and Debian's python3.11),
// read from outside with layouts built from runtime-layouts.md §2.3-2.5 and with the layouts
// discover_python finds.
#include "symbolizer/python/code_object_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "symbolizer/python/python_runtime.h"
#include "tests/support/process_harness.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;

// The code-object and string offsets of runtime-layouts.md §2.4/§2.5 and, for checking where a
// frame stands, the frame fields of §2.3.
PythonLayout layout_from_doc_tables(int minor) {
  PythonLayout layout;
  layout.version = {3, minor, 0};
  const bool before_311 = minor <= 10;
  layout.code_firstlineno = before_311 ? 40 : minor == 11 ? 72 : 68;
  layout.code_filename = before_311 ? 104 : 112;
  layout.code_name = before_311 ? 112 : 120;
  layout.code_qualname = before_311 ? -1 : 128;
  layout.code_linetable = before_311 ? 120 : 136;
  layout.code_adaptive = before_311 ? -1 : minor == 11 ? 184 : minor == 12 ? 192 : 200;
  layout.unicode_ascii_data = minor <= 11 ? 48 : 40;
  layout.unicode_compact_data = minor <= 11 ? 72 : 56;
  layout.frame_code = minor <= 11 ? 32 : 0;
  layout.frame_instruction = minor == 9 ? 104 : minor == 10 ? 96 : 56;
  layout.instruction_encoding = minor == 9    ? InstructionEncoding::kLastiBytes
                                : minor == 10 ? InstructionEncoding::kLastiCodeUnits
                                              : InstructionEncoding::kInstructionPointer;
  return layout;
}

// ---- fake memory ----------------------------------------------------------------------------

constexpr uint64_t kCodeType = 0x7000'0000;
constexpr uint64_t kOtherType = 0x7000'1000;

// Objects placed at chosen addresses. A read succeeds only inside one placed object, as a read
// of a wild pointer into unmapped memory would fail.
class FakeMemory {
 public:
  void place(uint64_t address, std::vector<uint8_t> bytes) { objects_[address] = std::move(bytes); }

  ReadMemory reader() {
    return [this](uint64_t address, void* out, size_t size) { return read(address, out, size); };
  }

  int reads() const { return reads_; }

 private:
  bool read(uint64_t address, void* out, size_t size) {
    ++reads_;
    auto object = objects_.upper_bound(address);
    if (object == objects_.begin()) return false;
    --object;
    const uint64_t offset = address - object->first;
    if (offset + size > object->second.size()) return false;
    std::memcpy(out, object->second.data() + offset, size);
    return true;
  }

  std::map<uint64_t, std::vector<uint8_t>> objects_;
  int reads_ = 0;
};

template <typename T>
void put(std::vector<uint8_t>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(value));
}

// A compact str as CPython lays it out: the narrowest kind that holds every code point.
std::vector<uint8_t> compact_string(const PythonLayout& layout, const std::u32string& text,
                                    bool compact = true) {
  char32_t widest = 0;
  for (char32_t c : text) widest = std::max(widest, c);
  const bool ascii = widest < 0x80;
  const uint32_t kind = widest < 0x100 ? 1 : widest < 0x10000 ? 2 : 4;
  const size_t data_offset = ascii ? layout.unicode_ascii_data : layout.unicode_compact_data;
  std::vector<uint8_t> bytes(data_offset + (text.size() + 1) * kind);
  put<int64_t>(bytes, layout.unicode_length, static_cast<int64_t>(text.size()));
  put<uint32_t>(bytes, layout.unicode_state,
                (kind << 2) | (compact ? 1u << 5 : 0u) | (ascii ? 1u << 6 : 0u));
  for (size_t i = 0; i < text.size(); ++i) {
    const uint32_t code_point = text[i];
    std::memcpy(bytes.data() + data_offset + i * kind, &code_point, kind);  // little-endian
  }
  return bytes;
}

std::vector<uint8_t> bytes_object(const PythonLayout& layout, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> bytes(layout.bytes_data + data.size() + 1);
  put<int64_t>(bytes, layout.bytes_size, static_cast<int64_t>(data.size()));
  std::copy(data.begin(), data.end(), bytes.begin() + layout.bytes_data);
  return bytes;
}

// A line table that puts instruction 0 on first_line + 1, in the version's own format.
std::vector<uint8_t> first_line_plus_one_table(int minor) {
  if (minor <= 9) return {0, 1};      // lnotab: advance 0 bytes, then +1 line
  if (minor == 10) return {2, 1};     // PEP 626: 2 bytes on the running line + 1
  return {0x80 | (11 << 3), 0, 1};    // location table: one-line form, +1, one code unit
}

struct FakeCode {
  uint64_t type = kCodeType;
  std::u32string filename = U"/srv/app/train.py";
  std::u32string name = U"step";
  std::u32string qualname = U"Trainer.step";
  int first_line = 41;
  bool compact_name = true;
};

constexpr uint64_t kCodeAddress = 0x1000'0000;

// Places a code object at kCodeAddress and its strings and line table after it.
void place_code(FakeMemory& memory, const PythonLayout& layout, const FakeCode& code) {
  constexpr uint64_t kFilename = 0x2000'0000, kName = 0x3000'0000, kQualname = 0x4000'0000,
                     kTable = 0x5000'0000;
  std::vector<uint8_t> object(256);
  put<uint64_t>(object, layout.object_type, code.type);
  put<uint64_t>(object, layout.code_filename, kFilename);
  put<uint64_t>(object, layout.code_name, kName);
  if (layout.code_qualname >= 0) put<uint64_t>(object, layout.code_qualname, kQualname);
  put<uint64_t>(object, layout.code_linetable, kTable);
  put<int32_t>(object, layout.code_firstlineno, code.first_line);
  memory.place(kCodeAddress, std::move(object));
  memory.place(kFilename, compact_string(layout, code.filename));
  memory.place(kName, compact_string(layout, code.name, code.compact_name));
  memory.place(kQualname, compact_string(layout, code.qualname));
  memory.place(kTable, bytes_object(layout, first_line_plus_one_table(layout.version.minor)));
}

std::optional<CodeInfo> read_fake(const FakeCode& code, int minor = 12) {
  FakeMemory memory;
  const PythonLayout layout = [&] {
    PythonLayout doc = layout_from_doc_tables(minor);
    doc.code_type_address = kCodeType;
    return doc;
  }();
  place_code(memory, layout, code);
  return read_code_object(layout, memory.reader(), kCodeAddress);
}

TEST(CodeObjectReader, ReadsTheFieldsAtEachVersionsOffsets) {
  for (int minor = 9; minor <= 13; ++minor) {
    SCOPED_TRACE("3." + std::to_string(minor));
    const auto code = read_fake({}, minor);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(code->filename, "/srv/app/train.py");
    EXPECT_EQ(code->name, "step");
    // No co_qualname before 3.11: the name stands in for it.
    EXPECT_EQ(code->qualname, minor <= 10 ? "step" : "Trainer.step");
    EXPECT_EQ(code->first_line, 41);
    EXPECT_EQ(line(*code, 0), 42);
  }
}

TEST(CodeObjectReader, DecodesEveryCompactStringKindToUtf8) {
  FakeCode fake;
  fake.filename = U"/srv/donn\u00e9es/train.py";  // Latin-1, one byte per character
  fake.qualname = U"Mod\u00e8le.\u8ba1\u7b97";    // UCS-2
  fake.name = U"\U00020000\U00020001";            // UCS-4
  for (int minor : {11, 12}) {  // PyASCIIObject and PyCompactUnicodeObject shrank in 3.12
    SCOPED_TRACE("3." + std::to_string(minor));
    const auto code = read_fake(fake, minor);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(code->filename, "/srv/donn\xc3\xa9" "es/train.py");
    EXPECT_EQ(code->qualname, "Mod\xc3\xa8le.\xe8\xae\xa1\xe7\xae\x97");
    EXPECT_EQ(code->name, "\xf0\xa0\x80\x80\xf0\xa0\x80\x81");
  }
}

TEST(CodeObjectReader, ALoneSurrogateBecomesTheReplacementCharacter) {
  FakeCode fake;
  fake.name = U"a\xd800" "b";
  const auto code = read_fake(fake);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(code->name, "a\xef\xbf\xbd" "b");
}

TEST(CodeObjectReader, RejectsAnObjectOfAnotherType) {
  FakeCode fake;
  fake.type = kOtherType;
  EXPECT_EQ(read_fake(fake), std::nullopt);
}

TEST(CodeObjectReader, RejectsANonCompactString) {
  FakeCode fake;
  fake.compact_name = false;
  EXPECT_EQ(read_fake(fake), std::nullopt);
}

TEST(CodeObjectReader, RejectsAnUnreadableAddress) {
  FakeMemory memory;
  PythonLayout layout = layout_from_doc_tables(12);
  layout.code_type_address = kCodeType;
  EXPECT_EQ(read_code_object(layout, memory.reader(), 0xdead'0000), std::nullopt);
}

TEST(CodeObjectCache, ReadsEachAddressOnceWhetherItIsCodeOrNot) {
  FakeMemory memory;
  PythonLayout layout = layout_from_doc_tables(12);
  layout.code_type_address = kCodeType;
  place_code(memory, layout, {});
  constexpr uint64_t kNotCode = 0x6000'0000;
  std::vector<uint8_t> not_code(64);
  put<uint64_t>(not_code, layout.object_type, kOtherType);
  memory.place(kNotCode, not_code);

  CodeObjectCache cache(layout, memory.reader());
  const CodeInfo* first = cache.lookup(kCodeAddress);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->qualname, "Trainer.step");
  EXPECT_EQ(cache.lookup(kNotCode), nullptr);
  const int reads_after_first_lookups = memory.reads();
  bool read_now = true;
  EXPECT_EQ(cache.lookup(kCodeAddress, &read_now), first);
  EXPECT_FALSE(read_now);  // only the first lookup reads (the resolver's code observers rely on it)
  EXPECT_EQ(cache.lookup(kNotCode), nullptr);
  EXPECT_EQ(memory.reads(), reads_after_first_lookups);
}

// ---- live interpreters ----------------------------------------------------------------------

// Prints, as one JSON line, what it knows about its own code objects and the frame of
// blocked(), then sleeps in that frame. The names cover each string kind and a qualname that
// differs from the name; the directory and file name are Latin-1 but not ASCII.
constexpr const char* kChildScript = R"PY(import json
import sys
import time

FRAMES = []
CALL_LINE = None


def plain():
    pass


def größe():
    pass


def 计算():
    pass


def 𠀀𠀁():
    pass


class Outer:
    class Inner:
        def method(self):
            def local():
                pass
            return local


def blocked(call, announce):
    announce(sys._getframe())
    call(  # the call site
        3600,
    )


def remember_call_line(_):
    global CALL_LINE
    CALL_LINE = sys._getframe(1).f_lineno


def describe(code):
    return {"address": id(code), "filename": code.co_filename,
            "qualname": getattr(code, "co_qualname", code.co_name),
            "name": code.co_name, "first_line": code.co_firstlineno}


def announce(frame):
    FRAMES.append(frame)  # keeps the frame object, and on 3.11+ its f_frame, alive
    functions = [plain, größe, 计算, 𠀀𠀁, Outer.Inner.method, Outer.Inner().method(), blocked]
    print(json.dumps({"code_type": id(type(plain.__code__)),
                      "codes": [describe(function.__code__) for function in functions],
                      "frame": id(frame), "frame_code": id(blocked.__code__),
                      "call_line": CALL_LINE}), flush=True)


# The first run learns the line Python gives the call; the second blocks in it.
blocked(remember_call_line, lambda frame: None)
blocked(time.sleep, announce)
)PY";

int source_line_containing(const std::string& needle) {
  int line_number = 1;
  const std::string_view script = kChildScript;
  const size_t at = script.find(needle);
  for (size_t i = 0; i < at; ++i) line_number += script[i] == '\n';
  return line_number;
}

struct Interpreter {
  const char* label;
  const char* path;
  int minor;
};

const Interpreter kInterpreters[] = {
    {"pyenv_3_9", "/root/.pyenv/versions/3.9.18/bin/python3", 9},
    {"pyenv_3_10", "/root/.pyenv/versions/3.10.13/bin/python3", 10},
    {"pyenv_3_11", "/root/.pyenv/versions/3.11.7/bin/python3", 11},
    {"pyenv_3_12", "/root/.pyenv/versions/3.12.1/bin/python3", 12},
    {"pyenv_3_13", "/root/.pyenv/versions/3.13.0/bin/python3", 13},
    {"debian_3_11", "/usr/bin/python3.11", 11},
};

enum class LayoutSource { kDocTables, kDiscovery };

// A Python frame object's _PyInterpreterFrame* f_frame (3.11-3.13: after PyObject_HEAD and
// f_back). Before 3.11 the frame object is the frame.
constexpr uint64_t kFrameObjectInterpreterFrame = 24;

class LiveInterpreter
    : public ::testing::TestWithParam<std::tuple<Interpreter, LayoutSource>> {
 protected:
  void SetUp() override {
    interpreter_ = std::get<0>(GetParam());
    if (!fs::exists(interpreter_.path)) {
      GTEST_SKIP() << "SKIPPED: " << interpreter_.path << " is not installed; its code objects "
                   << "are not checked";
    }
    const fs::path directory = scratch_.path() / "donn\xc3\xa9" "es";
    fs::create_directories(directory);
    script_path_ = directory / "\xc3\xa9" "chantillon.py";
    std::ofstream(script_path_) << kChildScript;

    child_.emplace(test::SpawnOptions{.argv = {interpreter_.path, script_path_.string()},
                                      .pipe_stdout = true});
    const auto line = child_->stdout_lines().read_line(std::chrono::seconds(30));
    ASSERT_TRUE(line.has_value()) << interpreter_.path << " printed nothing";
    report_ = nlohmann::json::parse(*line);

    if (std::get<1>(GetParam()) == LayoutSource::kDocTables) {
      layout_ = layout_from_doc_tables(interpreter_.minor);
      layout_.code_type_address = report_.at("code_type").get<uint64_t>();
    } else {
      std::string why_not;
      auto discovered = discover_python(child_->pid(), &why_not);
      ASSERT_TRUE(discovered.has_value()) << "discover_python: " << why_not;
      ASSERT_EQ(discovered->version.minor, interpreter_.minor);
      EXPECT_EQ(discovered->code_type_address, report_.at("code_type").get<uint64_t>());
      layout_ = *discovered;
    }
  }

  test::ScratchDirectory scratch_;
  Interpreter interpreter_{};
  fs::path script_path_;
  std::optional<test::ChildProcess> child_;
  nlohmann::json report_;
  PythonLayout layout_;
};

TEST_P(LiveInterpreter, ReadsNamesFilesAndFirstLines) {
  CodeObjectCache cache(layout_, ProcessMemory(child_->pid()));
  const auto& codes = report_.at("codes");
  ASSERT_EQ(codes.size(), 7u);
  for (const auto& expected : codes) {
    const auto name = expected.at("name").get<std::string>();
    SCOPED_TRACE(name);
    const CodeInfo* code = cache.lookup(expected.at("address").get<uint64_t>());
    ASSERT_NE(code, nullptr);
    EXPECT_EQ(code->filename, script_path_.string());
    EXPECT_EQ(code->filename, expected.at("filename").get<std::string>());
    EXPECT_EQ(code->name, name);
    EXPECT_EQ(code->qualname, expected.at("qualname").get<std::string>());
    EXPECT_EQ(code->first_line, expected.at("first_line").get<int>());
  }
  // Spot checks against the script itself, so a child that reported nonsense cannot pass.
  EXPECT_EQ(codes[1].at("name"), "gr\xc3\xb6\xc3\x9f" "e");
  EXPECT_EQ(codes[2].at("name"), "\xe8\xae\xa1\xe7\xae\x97");
  EXPECT_EQ(codes[3].at("name"), "\xf0\xa0\x80\x80\xf0\xa0\x80\x81");
  EXPECT_EQ(cache.lookup(codes[5].at("address").get<uint64_t>())->qualname,
            interpreter_.minor >= 11 ? "Outer.Inner.method.<locals>.local" : "local");
  EXPECT_EQ(codes[6].at("first_line").get<int>(), source_line_containing("def blocked("));
}

TEST_P(LiveInterpreter, RejectsObjectsThatAreNotCode) {
  CodeObjectCache cache(layout_, ProcessMemory(child_->pid()));
  EXPECT_EQ(cache.lookup(report_.at("frame").get<uint64_t>()), nullptr);  // a frame object
  EXPECT_EQ(cache.lookup(report_.at("code_type").get<uint64_t>()), nullptr);  // PyCode_Type itself
  EXPECT_EQ(cache.lookup(8), nullptr);  // unmapped
}

// The instruction a stack walker reads from `frame` (a PyFrameObject before 3.11, a
// _PyInterpreterFrame from 3.11), in the unit LineTable takes: 3.9 f_lasti bytes, 3.10 f_lasti
// code units, 3.11/3.12 prev_instr and 3.13 instr_ptr turned into a code-unit index.
std::optional<uint32_t> read_instruction(const ProcessMemory& memory, const PythonLayout& layout,
                                         uint64_t frame, uint64_t code_address) {
  if (layout.instruction_encoding == InstructionEncoding::kInstructionPointer) {
    const auto pointer = memory.read_value<uint64_t>(frame + layout.frame_instruction);
    const uint64_t bytecode = code_address + static_cast<uint64_t>(layout.code_adaptive);
    if (!pointer || *pointer < bytecode) return std::nullopt;
    return static_cast<uint32_t>((*pointer - bytecode) / 2);
  }
  const auto lasti = memory.read_value<int32_t>(frame + layout.frame_instruction);
  if (!lasti || *lasti < 0) return std::nullopt;
  return static_cast<uint32_t>(*lasti);
}

// A frame blocked in a call must decode to the line of the call, which is the line Python
// itself reports for it (the child learned it on a first run through the same code).
TEST_P(LiveInterpreter, AFrameBlockedInACallIsOnTheCallLine) {
  const ProcessMemory memory(child_->pid());
  uint64_t frame = report_.at("frame").get<uint64_t>();
  if (layout_.instruction_encoding == InstructionEncoding::kInstructionPointer) {
    const auto interpreter_frame = memory.read_value<uint64_t>(frame + kFrameObjectInterpreterFrame);
    ASSERT_TRUE(interpreter_frame.has_value());
    frame = *interpreter_frame;
  }
  const auto code_address = memory.read_value<uint64_t>(frame + layout_.frame_code);
  ASSERT_TRUE(code_address.has_value());
  ASSERT_EQ(*code_address, report_.at("frame_code").get<uint64_t>());
  CodeObjectCache cache(layout_, memory);
  const CodeInfo* code = cache.lookup(*code_address);
  ASSERT_NE(code, nullptr);
  EXPECT_EQ(code->name, "blocked");

  const int call_line = source_line_containing("call(  # the call site");
  EXPECT_EQ(report_.at("call_line").get<int>(), call_line);
  // The child printed from inside announce(), the call before: give it the moment it needs to
  // return and enter time.sleep, where it then stays.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::optional<uint32_t> instruction;
  int decoded_line = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    instruction = read_instruction(memory, layout_, frame, *code_address);
    ASSERT_TRUE(instruction.has_value());
    decoded_line = line(*code, *instruction);
    if (decoded_line == call_line) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(decoded_line, call_line) << "instruction " << *instruction;
}

INSTANTIATE_TEST_SUITE_P(
    Interpreters, LiveInterpreter,
    ::testing::Combine(::testing::ValuesIn(kInterpreters),
                       ::testing::Values(LayoutSource::kDocTables, LayoutSource::kDiscovery)),
    [](const ::testing::TestParamInfo<LiveInterpreter::ParamType>& info) {
      return std::string(std::get<0>(info.param).label) +
             (std::get<1>(info.param) == LayoutSource::kDocTables ? "_doc_tables" : "_discovered");
    });

}  // namespace
}  // namespace tprof::symbolizer
