// Plans of libtorch_cpu files kept on disk between sessions, so that attaching again to the same
// torch build skips reading the library (hundreds of milliseconds, seconds on a busy machine).
//
// One entry per library build and shapes setting, in a directory that only root (or tprof's
// own user) may write, default /var/cache/tprof/plans (created 0700). An entry names the format
// and the tprof build that wrote it and the library build it is for (GNU build-id, size, header
// digest; mtime when there is no build-id), and carries a CRC-32 of its payload. A directory or
// entry someone else could have written, a symbolic link, or an entry that is damaged or
// another's is never read: said in one console line, the library is planned again and the
// entry rewritten. Entries are written whole to a temporary file and renamed into place, so
// that tprofs running at once never read half of one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "userspace/loader/unique_fd.h"
#include "userspace/session/torch_library_plan.h"

namespace tprof {

class PlanCache {
 public:
  // The entries' layout; a change of it (or of tprof's build) makes older entries another's.
  static constexpr uint32_t kFormatVersion = 2;  // 2: return sites carry their function

  // `directory` is created (0700, its parents as mkdir -p makes them) when missing.
  explicit PlanCache(std::string directory) : directory_(std::move(directory)) {}

  // $TPROF_PLAN_CACHE_DIR where it is set and not empty, else /var/cache/tprof/plans.
  static std::string default_directory();

  using Say = std::function<void(const std::string& line)>;
  struct Result {
    TorchLibraryPlan plan;
    bool from_cache = false;
  };
  // The plan of the libtorch_cpu file at `host_path` with or without shapes: its entry's, when
  // one for this very build of the file and of tprof is there and whole; else `make()`'s, then
  // written for the next session. An unusable directory (said once), an unusable entry, an
  // entry not written: one line each on `say`.
  Result plan(const std::string& host_path, bool record_shapes, const std::function<TorchLibraryPlan()>& make,
              const Say& say);

  // The file name of the entry for that library and setting (to find it, in tests).
  static std::string entry_name(const std::string& host_path, bool record_shapes);

 private:
  // The directory, opened and checked on first use; none when it is unusable (said once).
  const UniqueFd* directory(const Say& say);

  std::string directory_;
  std::optional<UniqueFd> directory_fd_;
  bool refused_ = false;
};

}  // namespace tprof
