#include "userspace/assemble/memory_ledger.h"

#include <algorithm>

namespace tprof {

void MemoryLedger::keep_peak_holders_before_falling() {
  if (!at_peak_stale_ || total_ != peak_) return;
  at_peak_ = live_by_site_;
  at_peak_stale_ = false;
}

void MemoryLedger::add_to_site(const Site& site, int64_t bytes, int64_t blocks) {
  auto& [site_bytes, site_blocks] = live_by_site_[site];
  site_bytes += bytes;
  site_blocks += blocks;
  if (site_blocks == 0) live_by_site_.erase(site);
}

std::optional<MemoryLedger::Change> MemoryLedger::allocate(uint64_t address, uint64_t bytes, Site site,
                                                           uint64_t time_ns) {
  if (const auto stale = blocks_.find(address); stale != blocks_.end()) {
    // Its free was lost: the allocator cannot hand out a live block twice.
    keep_peak_holders_before_falling();
    total_ -= static_cast<int64_t>(stale->second.bytes);
    add_to_site(stale->second.site, -static_cast<int64_t>(stale->second.bytes), -1);
    blocks_.erase(stale);
  }
  if (blocks_.size() >= max_live_blocks_) {
    ++forgotten_;
    return std::nullopt;
  }
  blocks_.emplace(address, Block{bytes, site, time_ns});
  add_to_site(site, static_cast<int64_t>(bytes), 1);
  total_ += static_cast<int64_t>(bytes);
  if (total_ > peak_) {
    peak_ = total_;
    peak_time_ns_ = time_ns;
    at_peak_stale_ = true;
  }
  return Change{static_cast<int64_t>(bytes), total_, site};
}

std::optional<MemoryLedger::Change> MemoryLedger::free(uint64_t address) {
  const auto block = blocks_.find(address);
  if (block == blocks_.end()) {
    ++unknown_frees_;
    return std::nullopt;
  }
  keep_peak_holders_before_falling();
  const Block freed = block->second;
  blocks_.erase(block);
  add_to_site(freed.site, -static_cast<int64_t>(freed.bytes), -1);
  total_ -= static_cast<int64_t>(freed.bytes);
  return Change{-static_cast<int64_t>(freed.bytes), total_, freed.site};
}

std::vector<MemoryLedger::Group> MemoryLedger::peak_holders() const {
  return largest_first(at_peak_stale_ ? live_by_site_ : at_peak_);
}

std::vector<MemoryLedger::Group> MemoryLedger::live_allocated_before(uint64_t time_ns) const {
  LiveBySite by_site;
  for (const auto& [address, block] : blocks_) {
    if (block.time_ns >= time_ns) continue;
    auto& [bytes, blocks] = by_site[block.site];
    bytes += static_cast<int64_t>(block.bytes);
    ++blocks;
  }
  return largest_first(by_site);
}

std::vector<MemoryLedger::Group> MemoryLedger::largest_first(const LiveBySite& by_site) {
  std::vector<Group> groups;
  groups.reserve(by_site.size());
  for (const auto& [site, live] : by_site) groups.push_back({site, live.first, live.second});
  std::sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.blocks > b.blocks;
  });
  return groups;
}

}  // namespace tprof
