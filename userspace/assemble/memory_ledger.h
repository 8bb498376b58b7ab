// --memory: the CPU allocator's live blocks as tprof saw them allocated, in time order. It
// sizes each free (the BPF probe on Delete sees only the address), keeps torch's running total
// (ProfiledCPUMemoryReporter's allocated_, counted from when profiling began), and knows which
// blocks were live at the peak, by where they were allocated.
//
// Bounded: at most kMaxLiveBlocks blocks are kept; an allocation past that is forgotten (left
// out, with its free) and counted. Where-allocated groups are bounded by the distinct stacks
// and ops (PythonStackStore::kMaxStacks and the operator table).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tprof {

struct StoredStack;

class MemoryLedger {
 public:
  // A block takes ~100 bytes here: a million live blocks, ~100 MiB.
  static constexpr size_t kMaxLiveBlocks = 1'000'000;

  // Where blocks were allocated: the allocating thread's Python stack (null: none) and its
  // innermost open range's operator index (UINT32_MAX: none).
  struct Site {
    const StoredStack* stack = nullptr;
    uint32_t operator_index = UINT32_MAX;
    bool operator==(const Site&) const = default;
  };
  struct Change {
    int64_t bytes = 0;            // negative for a free
    int64_t total_allocated = 0;  // after it
    Site site;                    // where the block was allocated
  };
  struct Group {
    Site site;
    int64_t bytes = 0;
    uint64_t blocks = 0;
  };

  explicit MemoryLedger(size_t max_live_blocks = kMaxLiveBlocks) : max_live_blocks_(max_live_blocks) {}

  // None when the block is forgotten (the map is full), or its address is already live (an
  // allocation whose free was lost: the old block is dropped from the total first).
  std::optional<Change> allocate(uint64_t address, uint64_t bytes, Site site, uint64_t time_ns);
  // None for a block never seen allocated (before tprof came, or forgotten).
  std::optional<Change> free(uint64_t address);

  int64_t total_allocated() const { return total_; }
  int64_t peak_allocated() const { return peak_; }
  uint64_t peak_time_ns() const { return peak_time_ns_; }
  uint64_t frees_of_unknown_blocks() const { return unknown_frees_; }
  uint64_t blocks_forgotten() const { return forgotten_; }
  uint64_t live_blocks() const { return blocks_.size(); }
  // The blocks live when the peak was first reached, by where they were allocated, largest first.
  std::vector<Group> peak_holders() const;
  // The blocks live now that were allocated before `time_ns`, likewise (a walk of every block).
  std::vector<Group> live_allocated_before(uint64_t time_ns) const;

 private:
  struct Block {
    uint64_t bytes;
    Site site;
    uint64_t time_ns;  // allocated
  };
  struct SiteHash {
    size_t operator()(const Site& site) const {
      return std::hash<const void*>()(site.stack) ^ (std::hash<uint32_t>()(site.operator_index) << 1);
    }
  };
  using LiveBySite = std::unordered_map<Site, std::pair<int64_t, uint64_t>, SiteHash>;  // bytes, blocks
  void add_to_site(const Site& site, int64_t bytes, int64_t blocks);
  void keep_peak_holders_before_falling();
  static std::vector<Group> largest_first(const LiveBySite& by_site);

  size_t max_live_blocks_;
  std::unordered_map<uint64_t, Block> blocks_;
  LiveBySite live_by_site_;
  // The peak's holders are copied only when the total first falls from a new peak (or asked
  // for while at it): while a step allocates, every allocation is a new peak.
  LiveBySite at_peak_;
  bool at_peak_stale_ = false;
  int64_t total_ = 0;
  int64_t peak_ = 0;
  uint64_t peak_time_ns_ = 0;
  uint64_t unknown_frees_ = 0;
  uint64_t forgotten_ = 0;
};

}  // namespace tprof
