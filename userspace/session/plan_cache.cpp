#include "userspace/session/plan_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "symbolizer/binary/elf_identity.h"
#include "symbolizer/binary/hex_text.h"
#include "userspace/session/plan_bytes.h"
#include "userspace/session/plan_serialization.h"

#ifndef TPROF_VERSION
#error "TPROF_VERSION must be defined by the build"
#endif

namespace tprof {
namespace {

constexpr const char* kDefaultDirectory = "/var/cache/tprof/plans";
constexpr uint64_t kMagic = 0x4e4c50464f525054;  // "TPROFPLN", little-endian
// A real entry is a few MiB: anything far larger is not one, and is not read into memory.
constexpr uint64_t kMaxEntryBytes = 64 << 20;

// Why the directory or an entry is not used. `other_build`: an entry another tprof build wrote,
// which is to be expected after an upgrade, not a warning.
struct Refused : std::runtime_error {
  explicit Refused(const std::string& why, bool other_build = false)
      : std::runtime_error(why), other_build(other_build) {}
  bool other_build;
};

std::string error_text(int error) { return std::strerror(error); }

// What an entry must have been written for: this tprof and this build of the library.
struct EntryKey {
  std::string writer;                // tprof's version and its executable's build
  symbolizer::ElfIdentity library;   // mtime 0 when there is a build-id: a copy is the same build
  bool record_shapes = false;

  bool operator==(const EntryKey&) const = default;
};

// tprof's version and the build-id of its executable (else its size, mtime and layout): a
// rebuilt tprof may plan differently, so its entries are another's.
const std::string& tprof_build() {
  static const std::string build = [] {
    const symbolizer::ElfIdentity self = symbolizer::read_elf_identity("/proc/self/exe");
    const std::string id = !self.build_id.empty()
                               ? symbolizer::hex_bytes(self.build_id)
                               : std::to_string(self.size) + "-" + std::to_string(self.mtime_ns) + "-" +
                                     symbolizer::hex(self.layout_digest);
    return std::string(TPROF_VERSION) + " " + id;
  }();
  return build;
}

EntryKey key_for(const std::string& host_path, bool record_shapes) {
  EntryKey key{tprof_build(), symbolizer::read_elf_identity(host_path), record_shapes};
  if (!key.library.build_id.empty()) key.library.mtime_ns = 0;
  return key;
}

std::string name_of(const EntryKey& key) {
  const symbolizer::ElfIdentity& library = key.library;
  const std::string build = !library.build_id.empty()
                                ? symbolizer::hex_bytes(library.build_id)
                                : "nobuildid-" + std::to_string(library.size) + "-" + std::to_string(library.mtime_ns);
  char digest[17];
  std::snprintf(digest, sizeof(digest), "%016llx", static_cast<unsigned long long>(library.layout_digest));
  return build + "-" + digest + (key.record_shapes ? "-shapes" : "-no-shapes") + ".plan";
}

uint32_t checksum(std::string_view bytes) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

void put_library(ByteWriter& out, const EntryKey& key) {
  out.string(key.library.build_id);
  out.u64(key.library.size);
  out.i64(key.library.mtime_ns);
  out.u64(key.library.layout_digest);
  out.boolean(key.record_shapes);
}

// The entry: a header naming what it is for, then the payload.
std::string entry_bytes(const EntryKey& key, const std::string& payload) {
  ByteWriter out;
  out.u64(kMagic);
  out.u32(PlanCache::kFormatVersion);
  out.string(key.writer);
  put_library(out, key);
  out.u64(payload.size());
  out.u32(checksum(payload));
  return out.bytes() + payload;
}

EntryKey read_key(ByteReader& in, std::string writer) {
  EntryKey key{std::move(writer), {}, false};
  key.library.build_id = in.string();
  key.library.size = in.u64();
  key.library.mtime_ns = in.i64();
  key.library.layout_digest = in.u64();
  key.record_shapes = in.boolean();
  return key;
}

// The payload of `entry`, once its header says it is for `key` and it is whole.
std::string_view payload_of(std::string_view entry, const EntryKey& key) {
  ByteReader in(entry);
  try {
    if (in.u64() != kMagic) throw Refused("is not a tprof plan cache entry");
    if (const uint32_t version = in.u32(); version != PlanCache::kFormatVersion)
      throw Refused("has format version " + std::to_string(version) + ", this tprof's is " +
                        std::to_string(PlanCache::kFormatVersion),
                    /*other_build=*/true);
    std::string writer = in.string();
    if (writer != key.writer) throw Refused("was written by another tprof build (" + writer + ")", true);
    if (!(read_key(in, std::move(writer)) == key))
      throw Refused("is for another build of the library or shapes setting");
    const uint64_t size = in.u64();
    const uint32_t expected = in.u32();
    if (size != in.left()) throw Refused(size > in.left() ? "is truncated" : "has bytes past its end");
    const std::string_view payload = in.take(size);
    if (checksum(payload) != expected) throw Refused("fails its checksum");
    return payload;
  } catch (const MalformedBytes&) {
    throw Refused("is truncated");
  }
}

// Why a file or directory that someone other than root or tprof's user could have written is
// not trusted; "" when it is not.
std::string untrusted(const struct stat& status) {
  if (status.st_uid != 0 && status.st_uid != ::geteuid())
    return "it is owned by uid " + std::to_string(status.st_uid) + ", neither root nor tprof's user";
  if ((status.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(status.st_mode & 07777));
    return std::string("group or others may write it (mode ") + mode + ")";
  }
  return "";
}

std::string read_all(int fd, uint64_t size) {
  std::string bytes(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    const ssize_t read = ::read(fd, bytes.data() + done, size - done);
    if (read < 0 && errno == EINTR) continue;
    if (read < 0) throw Refused("cannot be read: " + error_text(errno));
    if (read == 0) break;  // shorter than it was: the header says it is truncated
    done += static_cast<uint64_t>(read);
  }
  bytes.resize(done);
  return bytes;
}

// The entry's bytes; none when there is no entry. Never through a link, nor from a file
// someone else could have written.
std::optional<std::string> read_entry(int directory, const std::string& name) {
  // O_NONBLOCK: a FIFO put there must not hang tprof (it is refused below).
  const UniqueFd file(::openat(directory, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!file && errno == ENOENT) return std::nullopt;
  if (!file) throw Refused(errno == ELOOP ? "is a symbolic link" : "cannot be opened: " + error_text(errno));
  struct stat status{};
  if (::fstat(file.get(), &status) != 0) throw Refused("cannot be examined: " + error_text(errno));
  if (!S_ISREG(status.st_mode)) throw Refused("is not a regular file");
  if (const std::string why = untrusted(status); !why.empty()) throw Refused("is not trusted: " + why);
  if (static_cast<uint64_t>(status.st_size) > kMaxEntryBytes) throw Refused("is far larger than any plan");
  return read_all(file.get(), static_cast<uint64_t>(status.st_size));
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(written));
  }
  return true;
}

// Writes a temporary file of tprof's own, then renames it over the entry: a reader sees the old
// entry or the new one, whole. Throws std::runtime_error.
void write_entry(int directory, const std::string& name, const std::string& bytes) {
  const std::string temporary = "." + name + "." + std::to_string(::getpid()) + ".tmp";
  ::unlinkat(directory, temporary.c_str(), 0);  // left by a killed tprof that had this pid
  const UniqueFd file(
      ::openat(directory, temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!file) throw std::runtime_error("cannot create " + temporary + ": " + error_text(errno));
  if (!write_all(file.get(), bytes) ||
      ::renameat(directory, temporary.c_str(), directory, name.c_str()) != 0) {
    const int error = errno;
    ::unlinkat(directory, temporary.c_str(), 0);
    throw std::runtime_error(error_text(error));
  }
}

UniqueFd open_directory(const std::string& path) {
  return UniqueFd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
}

// The directory, created if missing: only root or tprof's user may have written it, or what
// is in it.
UniqueFd open_checked_directory(const std::string& path) {
  UniqueFd directory = open_directory(path);
  if (!directory && errno == ENOENT) {
    std::error_code ignored;  // a parent that cannot be made fails the mkdir below, said there
    std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ignored);
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) throw Refused("cannot create it: " + error_text(errno));
    directory = open_directory(path);
  }
  if (!directory) {
    const int error = errno;
    struct stat link{};
    if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) throw Refused("it is a symbolic link");
    throw Refused("cannot open it: " + error_text(error));
  }
  struct stat status{};
  if (::fstat(directory.get(), &status) != 0) throw Refused("cannot examine it: " + error_text(errno));
  if (const std::string why = untrusted(status); !why.empty()) throw Refused(why);
  return directory;
}

// One entry of the directory, for one library build and shapes setting.
struct Entry {
  int directory;
  std::string name;
  std::string path;  // for messages
  EntryKey key;

  static Entry of(int directory, const std::string& directory_path, EntryKey key) {
    std::string name = name_of(key);
    return {directory, name, directory_path + "/" + name, std::move(key)};
  }

  // The plan kept there; none when there is none, or it is refused (said).
  std::optional<TorchLibraryPlan> read(const std::string& host_path, const PlanCache::Say& say) const {
    try {
      if (const auto bytes = read_entry(directory, name)) return deserialize_plan(payload_of(*bytes, key), host_path);
    } catch (const Refused& refusal) {
      say(std::string(refusal.other_build ? "" : "warning: ") + "plan cache entry " + path + " " + refusal.what() +
          ": planning the library again");
    } catch (const std::exception& error) {  // MalformedBytes, or anything else the entry caused
      say("warning: plan cache entry " + path + " is malformed (" + error.what() + "): planning the library again");
    }
    return std::nullopt;
  }

  void write(const std::string& host_path, const TorchLibraryPlan& plan, const PlanCache::Say& say) const {
    try {
      // A library replaced while it was planned: the plan may be of either file, so none is kept.
      if (key_for(host_path, key.record_shapes) == key)
        write_entry(directory, name, entry_bytes(key, serialize_plan(plan)));
    } catch (const std::exception& error) {
      say("warning: plan cache entry " + path + " not written: " + error.what());
    }
  }
};

}  // namespace

std::string PlanCache::default_directory() {
  const char* chosen = std::getenv("TPROF_PLAN_CACHE_DIR");
  return chosen != nullptr && *chosen != '\0' ? chosen : kDefaultDirectory;
}

std::string PlanCache::entry_name(const std::string& host_path, bool record_shapes) {
  return name_of(key_for(host_path, record_shapes));
}

const UniqueFd* PlanCache::directory(const Say& say) {
  if (!directory_fd_ && !refused_) {
    try {
      directory_fd_ = open_checked_directory(directory_);
    } catch (const Refused& refusal) {
      refused_ = true;
      say("warning: plan cache " + directory_ + " not used: " + refusal.what() +
          "; libtorch_cpu is planned on every attach (--no-plan-cache turns the cache off)");
    }
  }
  return directory_fd_ ? &*directory_fd_ : nullptr;
}

PlanCache::Result PlanCache::plan(const std::string& host_path, bool record_shapes,
                                  const std::function<TorchLibraryPlan()>& make, const Say& say) {
  const UniqueFd* directory = this->directory(say);
  std::optional<Entry> entry;
  try {
    if (directory) entry = Entry::of(directory->get(), directory_, key_for(host_path, record_shapes));
  } catch (const std::exception& error) {
    say(std::string("warning: plan cache not used: ") + error.what());
  }
  if (!entry) return {make(), false};
  if (auto cached = entry->read(host_path, say)) return {std::move(*cached), true};
  Result made{make(), false};
  entry->write(host_path, made.plan, say);
  return made;
}

}  // namespace tprof
