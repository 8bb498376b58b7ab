#include "exporters/output_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>

namespace tprof::exporters {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Inflates a whole gzip file with zlib, independently of the code under test.
std::string read_gzip_file(const fs::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw std::runtime_error("gzopen failed: " + path.string());
  std::string text;
  char chunk[1 << 16];
  int read = 0;
  while ((read = gzread(file, chunk, sizeof chunk)) > 0) text.append(chunk, read);
  const bool failed = read < 0;
  gzclose(file);
  if (failed) throw std::runtime_error("gzread failed: " + path.string());
  return text;
}

// More than the writer's 1 MiB buffer, in uneven pieces, so that buffering and draining are
// both exercised; varied enough that deflate has work to do.
std::string make_payload() {
  std::string payload;
  for (int i = 0; payload.size() < 3'500'000; ++i) {
    payload += "{\"ph\": \"X\", \"name\": \"aten::op_" + std::to_string(i % 977) + "\", \"ts\": " +
               std::to_string(i * 7919) + "},\n";
  }
  return payload;
}

void write_in_pieces(OutputFile& out, std::string_view payload) {
  size_t pos = 0;
  for (size_t piece = 1; pos < payload.size(); piece = piece * 3 % 70'001 + 1) {  // 1 B to 70 KB
    out.write(payload.substr(pos, piece));
    pos += piece;
  }
}

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "tprof_output_file_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr) << std::strerror(errno);
    directory_ = pattern;
  }
  void TearDown() override { fs::remove_all(directory_); }

  fs::path directory_;
};

TEST_F(OutputFileTest, TempFileExistsBeforeCommitAndFinalFileDoesNot) {
  const fs::path final_path = directory_ / "trace.json";
  OutputFile out(final_path.string());
  EXPECT_TRUE(fs::exists(directory_ / "trace.json.partial"));
  out.write("{}");
  EXPECT_FALSE(fs::exists(final_path));
  EXPECT_EQ(out.path(), final_path.string());
}

TEST_F(OutputFileTest, CommitPublishesEverythingWrittenAndRemovesTempFile) {
  const fs::path final_path = directory_ / "trace.json";
  const std::string payload = make_payload();
  {
    OutputFile out(final_path.string());
    write_in_pieces(out, payload);
    out.commit();
    EXPECT_FALSE(fs::exists(directory_ / "trace.json.partial"));
  }
  ASSERT_TRUE(fs::exists(final_path));  // the destructor of a committed file keeps it
  EXPECT_TRUE(read_file(final_path) == payload);  // not EXPECT_EQ: no multi-MB diff
}

// tprof never overwrites a file unasked (--force), and then only a regular file.
TEST_F(OutputFileTest, AnExistingFileIsRefusedUnlessItIsToBeReplaced) {
  const fs::path final_path = directory_ / "trace.json";
  std::ofstream(final_path) << "old contents that are longer than the new ones";
  try {
    OutputFile out(final_path.string());
    FAIL() << "expected the constructor to throw";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()), "cannot write " + final_path.string() + ": it already exists (--force replaces it)");
  }
  EXPECT_FALSE(fs::exists(directory_ / "trace.json.partial"));
  OutputFile out(final_path.string(), {.replace_existing = true});
  EXPECT_EQ(read_file(final_path), "old contents that are longer than the new ones");
  out.write("new");
  out.commit();
  EXPECT_EQ(read_file(final_path), "new");
}

// `-o /dev/null` as root must not replace the device node with a file: a device, a directory,
// a FIFO or a link at the path is refused, --force or not, before anything is created.
TEST_F(OutputFileTest, WhatIsNotARegularFileIsRefusedEvenWhenReplacing) {
  const fs::path fifo = directory_ / "fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  fs::create_directory(directory_ / "directory");
  fs::create_symlink(directory_ / "elsewhere", directory_ / "link");
  for (const fs::path& path : {fs::path("/dev/null"), fs::path("/dev/full"), fifo, directory_ / "directory",
                               directory_ / "link"}) {
    for (const bool replace : {false, true}) {
      SCOPED_TRACE(path.string() + (replace ? " --force" : ""));
      try {
        OutputFile out(path.string(), {.replace_existing = replace});
        FAIL() << "expected the constructor to throw";
      } catch (const std::runtime_error& error) {
        EXPECT_NE(std::string(error.what()).find("not a regular file"), std::string::npos) << error.what();
      }
      EXPECT_FALSE(fs::exists(path.string() + ".partial"));
    }
  }
  struct stat status {};
  ASSERT_EQ(lstat("/dev/null", &status), 0);
  EXPECT_TRUE(S_ISCHR(status.st_mode)) << "/dev/null is no longer a character device";
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_symlink(directory_ / "link"));
}

// A file that appears at the final name while recording is not replaced either: the recording
// stays, complete, in the temp file, which the error names.
TEST_F(OutputFileTest, AFileThatAppearsWhileRecordingIsNotReplaced) {
  const fs::path final_path = directory_ / "trace.json";
  OutputFile out(final_path.string());
  out.write("recorded");
  std::ofstream(final_path) << "someone else's";
  try {
    out.commit();
    FAIL() << "expected commit to throw";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("appeared"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find(out.temp_path()), std::string::npos) << error.what();
  }
  EXPECT_EQ(read_file(final_path), "someone else's");
  EXPECT_EQ(read_file(directory_ / "trace.json.partial"), "recorded");
}

// Without commit (an error ended the recording), a temp file that data reached stays for
// `tprof recover`; one that nothing reached is removed, and so is scratch (recover's own).
TEST_F(OutputFileTest, DestructionWithoutCommitKeepsWhatReachedTheFile) {
  const fs::path final_path = directory_ / "trace.json";
  {
    OutputFile out(final_path.string());
    out.write("buffered only");
  }
  EXPECT_FALSE(fs::exists(directory_ / "trace.json.partial"));
  {
    OutputFile out(final_path.string());
    write_in_pieces(out, make_payload());
    out.flush();
  }
  EXPECT_FALSE(fs::exists(final_path));
  EXPECT_TRUE(read_file(directory_ / "trace.json.partial") == make_payload());
  fs::remove(directory_ / "trace.json.partial");
  {
    OutputFile out(final_path.string(), {.temp_suffix = ".recovering", .keep_on_failure = false});
    write_in_pieces(out, make_payload());
    out.flush();
  }
  EXPECT_TRUE(fs::is_empty(directory_));
}

// A full disk (here: RLIMIT_FSIZE, which fails write(2) with EFBIG as ENOSPC would) stops the
// writing; what reached the file stays, and the one-line error says where and what to do.
TEST_F(OutputFileTest, AFailedWriteKeepsWhatWasWrittenAndSaysWhere) {
  const fs::path final_path = directory_ / "trace.json.gz";
  struct rlimit previous {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &previous), 0);
  const auto previous_handler = signal(SIGXFSZ, SIG_IGN);
  std::string message;
  {
    OutputFile out(final_path.string());
    const struct rlimit small = {64 * 1024, previous.rlim_max};
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
    try {
      for (int round = 0; round < 20; ++round) {
        write_in_pieces(out, make_payload());
        out.flush();
      }
    } catch (const std::runtime_error& error) {
      message = error.what();
    }
    setrlimit(RLIMIT_FSIZE, &previous);
  }
  signal(SIGXFSZ, previous_handler);
  EXPECT_EQ(message.find("cannot write " + final_path.string() + ": " + std::strerror(EFBIG) +
                         "; what was recorded so far is kept in " + final_path.string() + ".partial"),
            0u)
      << message;
  EXPECT_EQ(fs::file_size(directory_ / "trace.json.gz.partial"), 64u * 1024);
  EXPECT_FALSE(fs::exists(final_path));
}

TEST_F(OutputFileTest, UnwritableDirectoryThrowsAtConstructionAndWritesNothing) {
  // A missing directory rather than a read-only one: tests may run as root, which ignores
  // permission bits.
  const fs::path final_path = directory_ / "missing" / "trace.json";
  try {
    OutputFile out(final_path.string());
    FAIL() << "expected the constructor to throw";
  } catch (const std::runtime_error& error) {
    EXPECT_EQ(std::string(error.what()),
              "cannot write " + final_path.string() + ": " + std::strerror(ENOENT));
  }
  EXPECT_TRUE(fs::is_empty(directory_));
}

TEST_F(OutputFileTest, GzipSuffixWritesAGzipStreamThatInflatesToTheInput) {
  const fs::path final_path = directory_ / "trace.json.gz";
  const std::string payload = make_payload();
  OutputFile out(final_path.string());
  write_in_pieces(out, payload);
  out.commit();

  const std::string compressed = read_file(final_path);
  ASSERT_GE(compressed.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>(compressed[0]), 0x1F);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>(compressed[1]), 0x8B);
  EXPECT_LT(compressed.size(), payload.size() / 4);
  EXPECT_TRUE(read_gzip_file(final_path) == payload);
}

TEST_F(OutputFileTest, EmptyGzipFileIsAValidEmptyStream) {
  const fs::path final_path = directory_ / "empty.json.gz";
  OutputFile out(final_path.string());
  out.commit();
  EXPECT_EQ(read_gzip_file(final_path), "");
}

TEST_F(OutputFileTest, GzipFileIsNotPublishedWithoutCommit) {
  const fs::path final_path = directory_ / "trace.json.gz";
  {
    OutputFile out(final_path.string());
    EXPECT_TRUE(fs::exists(directory_ / "trace.json.gz.partial"));
    out.write("partial");
  }
  EXPECT_TRUE(fs::is_empty(directory_));
}

TEST_F(OutputFileTest, WritingAfterCommitIsRejected) {
  OutputFile out((directory_ / "trace.json").string());
  out.commit();
  EXPECT_THROW(out.write("late"), std::logic_error);
  EXPECT_THROW(out.commit(), std::logic_error);
}


TEST_F(OutputFileTest, CreatesTheFileForItsOwnerOnlyByDefault) {
  const fs::path path = directory_ / "trace.json";
  const mode_t old_umask = ::umask(0);  // the default must not depend on the caller's umask
  OutputFile out(path.string());
  ::umask(old_umask);
  out.write("{}");
  out.commit();
  EXPECT_EQ(fs::status(path).permissions(), fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(OutputFileTest, ModeIsAppliedExactlyWhateverTheUmask) {
  const fs::path path = directory_ / "trace.json";
  const mode_t old_umask = ::umask(077);
  OutputFile out(path.string(), 0644);
  ::umask(old_umask);
  out.commit();
  EXPECT_EQ(fs::status(path).permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
}

TEST_F(OutputFileTest, RefusesALinkPlantedAtTheTempNameAndLeavesItsTargetAlone) {
  const fs::path victim = directory_ / "victim";
  std::ofstream(victim) << "precious";
  const fs::path path = directory_ / "trace.json";
  fs::create_symlink(victim, directory_ / "trace.json.partial");
  try {
    OutputFile out(path.string());
    FAIL() << "a link at the temp name was followed";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("already exists"), std::string::npos) << error.what();
  }
  EXPECT_EQ(read_file(victim), "precious");
  EXPECT_TRUE(fs::is_symlink(directory_ / "trace.json.partial")) << "someone else's link is not removed";
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(OutputFileTest, RefusesADanglingLinkAtTheTempName) {
  const fs::path path = directory_ / "trace.json";
  fs::create_symlink(directory_ / "would-be-created", directory_ / "trace.json.partial");
  EXPECT_THROW(OutputFile out(path.string()), std::runtime_error);
  EXPECT_FALSE(fs::exists(directory_ / "would-be-created"));
}

TEST_F(OutputFileTest, RefusesATempFileAnotherWriterLeft) {
  const fs::path path = directory_ / "trace.json";
  std::ofstream(directory_ / "trace.json.partial") << "another run's data";
  EXPECT_THROW(OutputFile out(path.string()), std::runtime_error);
  EXPECT_EQ(read_file(directory_ / "trace.json.partial"), "another run's data");
}

// `tprof recover` must never take a file from under a running tprof: the temp file is locked
// (flock, per open file description) for as long as it is written, gzip's writer thread too.
TEST_F(OutputFileTest, TheTempFileIsLockedUntilItIsClosed) {
  for (const std::string name : {"trace.json", "trace.json.gz"}) {
    const fs::path path = directory_ / name;
    OutputFile out(path.string());
    out.write(make_payload());
    out.flush();
    auto lock_elsewhere = [](const fs::path& file) {
      const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      const bool locked = fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0;
      ::close(fd);
      return locked;
    };
    EXPECT_FALSE(lock_elsewhere(out.temp_path())) << name << ": the file being written is not locked";
    out.commit();
    EXPECT_TRUE(lock_elsewhere(path)) << name << ": the lock outlived the file's writing";
  }
}

// Recover's own temp file is scratch: the message for one left behind must not send the user
// to `tprof recover` it (which refuses anything but a .partial file).
TEST_F(OutputFileTest, ALeftoverTempFileIsReportedWithTheRemedyForItsSuffix) {
  const fs::path path = directory_ / "trace.json";
  auto reason = [&](std::string_view suffix) -> std::string {
    std::ofstream(path.string() + std::string(suffix)) << "what a killed writer left";
    try {
      OutputFile out(path.string(), {.temp_suffix = suffix});
    } catch (const std::runtime_error& error) {
      return error.what();
    }
    return "";
  };
  const std::string partial = reason(".partial");
  EXPECT_NE(partial.find("trace.json.partial already exists"), std::string::npos) << partial;
  EXPECT_NE(partial.find("`tprof recover` or remove it"), std::string::npos) << partial;
  const std::string recovering = reason(".recovering");
  EXPECT_NE(recovering.find("trace.json.recovering already exists"), std::string::npos) << recovering;
  EXPECT_EQ(recovering.find("tprof recover"), std::string::npos) << recovering;
}

}  // namespace
}  // namespace tprof::exporters
