// Discovery against every CPython on this machine: each test starts an interpreter that sleeps
// inside a known function, discovers its layout, and then proves the layout right by walking
// the live process's memory with it — runtime → interpreter → thread state (matched by thread
// id) → frames → code objects → strings — against what the child says about itself.
#include "symbolizer/python/python_runtime.h"

#include <gtest/gtest.h>

#include "tests/support/test_environment.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "symbolizer/binary/process_memory.h"
#include "symbolizer/python/code_object_reader.h"
#include "tests/support/process_harness.h"

namespace tprof::symbolizer {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Debian trixie (Python 3.13.5), unpacked by the project's setup into a separate root; the
// marker file appears once the unpacking has finished.
const fs::path kTrixieRoot = testing::trixie_root();
const fs::path kTrixieFinishedMarker = kTrixieRoot / ".tprof-complete";
// Debian sid (Python 3.14), likewise.
const fs::path kSidRoot = testing::sid_root();
const fs::path kSidFinishedMarker = kSidRoot / ".tprof-complete";

constexpr const char* kSleepingFunction = "tprof_sleeping_here";
constexpr const char* kMarkerArgument = "tprof-marker-argument";
constexpr int kSleepingFunctionFirstLine = 2;

// Prints "pid major minor micro thread_ident", then sleeps inside kSleepingFunction, whose
// first local variable is kMarkerArgument.
const std::string kChildScript =
    "import os, sys, threading, time\n"
    "def tprof_sleeping_here(marker):\n"
    "    print(os.getpid(), *sys.version_info[:3], threading.get_ident(), flush=True)\n"
    "    time.sleep(600)\n"
    "tprof_sleeping_here('tprof-marker-argument')\n";

fs::path pyenv_python(const std::string& version) {
  const char* home = std::getenv("HOME");
  return fs::path(home ? home : "/root") / ".pyenv/versions" / version / "bin/python3";
}

struct Interpreter {
  std::string name;                    // the test's name
  std::vector<std::string> command;    // runs this Python; the script's "-c" is appended
  fs::path must_exist;                 // skip (loudly) when missing
  std::string interpreter_file;        // the file name discovery must find
  bool needs_mount_namespace = false;  // skip (loudly) where we may not create one
};

// Runs `python_command` (a shell word list ending in the interpreter) in a new mount namespace
// in which `source` is bound onto /mnt. /proc/PID/maps then shows the target's paths under a
// /mnt that is empty in ours, as for a process in a container.
std::vector<std::string> in_mount_namespace(const std::string& source,
                                            const std::string& python_command) {
  return {"unshare",
          "--mount",
          "--propagation",
          "private",
          "sh",
          "-c",
          "mount --bind " + source + " /mnt && exec " + python_command + " \"$@\"",
          "sh"};
}

std::vector<Interpreter> interpreters_under_test() {
  std::vector<Interpreter> interpreters;
  for (const auto& [version, minor] :
       std::vector<std::pair<std::string, std::string>>{{"3.9.18", "3.9"},
                                                        {"3.10.13", "3.10"},
                                                        {"3.11.7", "3.11"},
                                                        {"3.12.1", "3.12"},
                                                        {"3.13.0", "3.13"}}) {
    const fs::path python = pyenv_python(version);
    std::string name = "pyenv_" + version;
    std::replace(name.begin(), name.end(), '.', '_');
    interpreters.push_back({name, {python.string()}, python, "libpython" + minor + ".so.1.0"});
  }
  // Statically linked, stripped ET_EXEC with _PyRuntime only in .dynsym.
  interpreters.push_back(
      {"debian_python3_11", {"/usr/bin/python3.11"}, "/usr/bin/python3.11", "python3.11"});
  // Another root, so the mapped path is only reachable as our own path, not via /proc/PID/root.
  interpreters.push_back({"trixie_chroot_python3",
                          {"chroot", kTrixieRoot.string(), "python3"},
                          kTrixieFinishedMarker,
                          "python3.13"});
  // Python 3.14 (torch 2.14's), from its own root.
  interpreters.push_back({"sid_chroot_python3",
                          {"chroot", kSidRoot.string(), "python3"},
                          kSidFinishedMarker,
                          "python3.14"});
  // A container's view: the mapped path /mnt/python3.11 exists only through /proc/PID/root.
  interpreters.push_back({"debian_python3_11_in_mount_namespace",
                          in_mount_namespace("/usr/bin", "/mnt/python3.11"), "/usr/bin/python3.11",
                          "python3.11", true});
  // A chroot inside a mount namespace: the mapped path /mnt/usr/bin/python3.13 exists neither
  // here nor under the target's root, so only /proc/PID/map_files reaches the file.
  interpreters.push_back({"trixie_chroot_in_mount_namespace",
                          in_mount_namespace(kTrixieRoot.string(), "chroot /mnt python3"),
                          kTrixieFinishedMarker, "python3.13", true});
  return interpreters;
}

struct ChildReport {
  pid_t pid = 0;
  PythonVersion version;
  uint64_t thread_ident = 0;
};

ChildReport parse_report(const std::string& line) {
  std::istringstream fields(line);
  ChildReport report;
  fields >> report.pid >> report.version.major >> report.version.minor >> report.version.micro >>
      report.thread_ident;
  if (!fields) throw std::runtime_error("cannot parse the child's report: " + line);
  return report;
}

// Reads the target's objects with a discovered layout, the way the BPF stack walker will.
class LayoutReader {
 public:
  LayoutReader(pid_t pid, const PythonLayout& layout) : memory_(pid), layout_(layout) {}

  // Throws when the target cannot be read there: the layout led the walk astray.
  template <typename T>
  T value(uint64_t address) const {
    std::optional<T> read = memory_.read_value<T>(address);
    if (!read) throw std::runtime_error("cannot read the target at " + std::to_string(address));
    return *read;
  }
  uint64_t pointer(uint64_t address) const { return value<uint64_t>(address); }

  // tp_name of the object's type.
  std::string type_name(uint64_t object) const {
    const uint64_t type = pointer(object + layout_.object_type);
    return memory_.read_string(pointer(type + layout_.type_name), 64).value_or("<unreadable>");
  }

  // A compact ASCII str (all names and paths here are).
  std::string ascii_string(uint64_t object) const {
    constexpr uint32_t kCompact = 1u << 5, kAscii = 1u << 6;
    const uint32_t state = value<uint32_t>(object + layout_.unicode_state);
    if ((state & kCompact) == 0 || (state & kAscii) == 0) return "<not compact ASCII>";
    const auto length = value<int64_t>(object + layout_.unicode_length);
    if (length < 0 || length > 4096) return "<bad length>";
    std::string text(static_cast<size_t>(length), '\0');
    if (!memory_.read(object + layout_.unicode_ascii_data, text.data(), text.size())) {
      return "<unreadable>";
    }
    return text;
  }

 private:
  ProcessMemory memory_;
  const PythonLayout& layout_;
};

struct FrameSeen {
  uint64_t frame = 0;
  uint64_t code = 0;
  std::string name;
};

class DiscoverPython : public ::testing::TestWithParam<Interpreter> {};

TEST_P(DiscoverPython, LayoutWalksTheLiveStackToTheSleepingFunction) {
  const Interpreter& interpreter = GetParam();
  if (!fs::exists(interpreter.must_exist)) {
    GTEST_SKIP() << "!!! " << interpreter.must_exist
                 << " is missing: discovery of this interpreter is NOT tested";
  }
  if (interpreter.needs_mount_namespace && !test::run_command({"unshare", "--mount", "true"}, 10s)
                                                .status.value_or(test::ExitStatus{})
                                                .succeeded()) {
    GTEST_SKIP() << "!!! cannot create a mount namespace here (needs CAP_SYS_ADMIN): discovery "
                    "through /proc/PID/root and /proc/PID/map_files is NOT tested";
  }
  std::vector<std::string> argv = interpreter.command;
  argv.push_back("-c");
  argv.push_back(kChildScript);
  test::ChildProcess child(test::SpawnOptions{.argv = argv, .pipe_stdout = true});
  const std::optional<std::string> line = child.stdout_lines().read_line(30s);
  ASSERT_TRUE(line) << "the child did not report; it said: " << child.stdout_lines().transcript();
  const ChildReport report = parse_report(*line);

  std::string why_not;
  const std::optional<PythonLayout> found = discover_python(report.pid, &why_not);
  ASSERT_TRUE(found) << why_not;
  const PythonLayout& layout = *found;

  EXPECT_EQ(layout.version.to_string(), report.version.to_string());
  EXPECT_EQ(fs::path(layout.interpreter_path).filename(), interpreter.interpreter_file);
  EXPECT_EQ(layout.from_debug_offsets, report.version.minor >= 13);
  std::string warnings;
  for (const std::string& warning : layout.warnings) warnings += "\n  " + warning;
  EXPECT_TRUE(layout.warnings.empty()) << "decoded offsets should match the tables:" << warnings;

  const LayoutReader reader(report.pid, layout);

  // Runtime → the one interpreter → the thread state whose thread_id is the child's
  // threading.get_ident() (pthread_self()).
  const uint64_t interpreter_state =
      reader.pointer(layout.runtime_address + layout.runtime_interpreters_head);
  ASSERT_NE(interpreter_state, 0u);
  EXPECT_EQ(reader.pointer(interpreter_state + layout.interpreter_next), 0u)
      << "the child runs only the main interpreter";
  uint64_t thread_state = reader.pointer(interpreter_state + layout.interpreter_threads_head);
  for (int hops = 0; thread_state != 0 && hops < 64; ++hops) {
    if (reader.pointer(thread_state + layout.thread_thread_id) == report.thread_ident) break;
    thread_state = reader.pointer(thread_state + layout.thread_next);
  }
  ASSERT_NE(thread_state, 0u) << "no thread state has thread_id " << report.thread_ident;
  if (layout.thread_native_thread_id >= 0) {
    // The main thread's kernel tid is the pid.
    EXPECT_EQ(reader.pointer(thread_state + static_cast<uint32_t>(layout.thread_native_thread_id)),
              static_cast<uint64_t>(report.pid));
  }

  // Thread state → frames, innermost first, skipping frames that run no Python code.
  uint64_t frame = reader.pointer(thread_state + layout.thread_frame);
  if (layout.cframe_current_frame >= 0) {
    frame = reader.pointer(frame + static_cast<uint32_t>(layout.cframe_current_frame));
  }
  std::vector<FrameSeen> frames;
  for (int hops = 0; frame != 0 && hops < 64; ++hops) {
    const uint64_t previous = reader.pointer(frame + layout.frame_previous);
    if (layout.frame_owner >= 0) {
      const auto owner = reader.value<uint8_t>(frame + static_cast<uint32_t>(layout.frame_owner));
      if (owner == layout.frame_owner_cstack || owner == layout.frame_owner_interpreter) {
        frame = previous;
        continue;
      }
    }
    const uint64_t code = reader.pointer(frame + layout.frame_code) & ~layout.executable_tag_mask;
    if (reader.pointer(code + layout.object_type) == layout.code_type_address) {
      frames.push_back({frame, code, reader.ascii_string(reader.pointer(code + layout.code_name))});
    }
    frame = previous;
  }
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].name, kSleepingFunction);
  EXPECT_EQ(frames[1].name, "<module>");

  // The sleeping function's code object and frame, field by field.
  const FrameSeen& sleeping = frames[0];
  EXPECT_EQ(reader.ascii_string(reader.pointer(sleeping.code + layout.code_filename)), "<string>");
  if (layout.code_qualname >= 0) {
    EXPECT_EQ(reader.ascii_string(
                  reader.pointer(sleeping.code + static_cast<uint32_t>(layout.code_qualname))),
              kSleepingFunction);
  }
  EXPECT_EQ(reader.value<int32_t>(sleeping.code + layout.code_firstlineno),
            kSleepingFunctionFirstLine);
  const uint64_t line_table = reader.pointer(sleeping.code + layout.code_linetable);
  EXPECT_EQ(reader.type_name(line_table), "bytes");
  const auto line_table_size = reader.value<int64_t>(line_table + layout.bytes_size);
  EXPECT_GT(line_table_size, 0);
  EXPECT_LT(line_table_size, 4096);
  if (layout.instruction_encoding == InstructionEncoding::kInstructionPointer) {
    ASSERT_GE(layout.code_adaptive, 0);
    const uint64_t bytecode = sleeping.code + static_cast<uint32_t>(layout.code_adaptive);
    const uint64_t instruction = reader.pointer(sleeping.frame + layout.frame_instruction);
    EXPECT_GE(instruction, bytecode);
    EXPECT_LT(instruction, bytecode + 1024) << "the function's bytecode is a few dozen units";
  } else {
    const auto last_instruction = reader.value<int32_t>(sleeping.frame + layout.frame_instruction);
    EXPECT_GT(last_instruction, 0);
    EXPECT_LT(last_instruction, 1024);
  }
  const uint64_t first_local =
      reader.pointer(sleeping.frame + layout.frame_localsplus) & ~layout.executable_tag_mask;
  EXPECT_EQ(reader.type_name(first_local), "str");
  EXPECT_EQ(reader.ascii_string(first_local), kMarkerArgument);

  // The frame slots' names: 3.11+'s co_localsplusnames, a tuple whose items follow a hash
  // cache on 3.14; 3.9/3.10's co_varnames (and no cells or free variables here).
  EXPECT_EQ(layout.code_localsplusnames >= 0, report.version.minor >= 11);
  EXPECT_EQ(layout.code_varnames >= 0, report.version.minor <= 10);
  const int32_t names = layout.code_localsplusnames >= 0 ? layout.code_localsplusnames : layout.code_varnames;
  EXPECT_EQ(reader.type_name(reader.pointer(sleeping.code + static_cast<uint32_t>(names))), "tuple");
  const ProcessMemory memory(report.pid);
  const auto slots = read_frame_slots(
      layout, [&memory](uint64_t address, void* out, size_t size) { return memory.read(address, out, size); },
      sleeping.code);
  ASSERT_TRUE(slots.has_value());
  EXPECT_EQ(slots->names, std::vector<std::string>{"marker"});
  ASSERT_EQ(slots->kinds.size(), 1u);
  EXPECT_EQ(slots->kinds[0] & kSlotIsCell, 0);
}

INSTANTIATE_TEST_SUITE_P(EveryInstalledInterpreter, DiscoverPython,
                         ::testing::ValuesIn(interpreters_under_test()),
                         [](const ::testing::TestParamInfo<Interpreter>& param) {
                           return param.param.name;
                         });

// True once process `pid` has mapped a file named `file_name`. posix_spawn returns while the
// child is still inside execve, before the new program's segments are mapped.
bool wait_until_mapped(pid_t pid, const std::string& file_name, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string maps_path = "/proc/" + std::to_string(pid) + "/maps";
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream maps(maps_path);
    for (std::string line; std::getline(maps, line);) {
      if (line.ends_with("/" + file_name)) return true;
    }
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

TEST(DiscoverPythonRefuses, AProcessWithoutPython) {
  test::ChildProcess sleeper(test::SpawnOptions{.argv = {"sleep", "60"}});
  ASSERT_TRUE(wait_until_mapped(sleeper.pid(), "sleep", 10s));
  std::string why_not;
  EXPECT_FALSE(discover_python(sleeper.pid(), &why_not));
  EXPECT_NE(why_not.find("no CPython interpreter in process " + std::to_string(sleeper.pid())),
            std::string::npos)
      << why_not;
  EXPECT_NE(why_not.find("does not export _PyRuntime"), std::string::npos) << why_not;
}

TEST(DiscoverPythonRefuses, AProcessThatIsGone) {
  pid_t gone = 0;
  {
    test::ChildProcess finished(test::SpawnOptions{.argv = {"true"}});
    ASSERT_TRUE(finished.wait_for_exit(10s));
    gone = finished.pid();
  }
  std::string why_not;
  EXPECT_FALSE(discover_python(gone, &why_not));
  EXPECT_NE(why_not.find("/proc/" + std::to_string(gone) + "/maps"), std::string::npos) << why_not;
}

TEST(DiscoverPythonRefuses, PythonBeforeTheSupportedRange) {
  const fs::path python = pyenv_python("3.8.18");
  if (!fs::exists(python)) {
    GTEST_SKIP() << "!!! " << python
                 << " is missing: the unsupported-version refusal is NOT tested";
  }
  test::ChildProcess child(
      test::SpawnOptions{.argv = {python.string(), "-c", kChildScript}, .pipe_stdout = true});
  const std::optional<std::string> line = child.stdout_lines().read_line(30s);
  ASSERT_TRUE(line);
  std::string why_not;
  EXPECT_FALSE(discover_python(parse_report(*line).pid, &why_not));
  EXPECT_EQ(why_not, "Python 3.8 is not supported (3.9–3.14 are)");
}

}  // namespace
}  // namespace tprof::symbolizer
