#include "stage_worker/engines/base/prefix_cache.h"

#include <utility>

namespace omnistage {

PrefixCache::PrefixCache(int capacity_blocks, int block_tokens)
    : capacity_blocks_(capacity_blocks), block_tokens_(block_tokens) {}

int64_t PrefixCache::Run(absl::Span<const uint64_t> blocks, bool* hitting) {
  int64_t hits = 0;
  for (uint64_t block : blocks) {
    if (!*hitting) break;
    if (Holds(block)) {
      ++hits;
    } else {
      *hitting = false;
    }
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) Touch(*it);
  const int64_t hit_tokens = hits * block_tokens_;
  stats_.hit_tokens += hit_tokens;
  stats_.miss_tokens += static_cast<int64_t>(blocks.size()) * block_tokens_ - hit_tokens;
  return hit_tokens;
}

void PrefixCache::Touch(uint64_t block) {
  auto it = where_.find(block);
  if (it != where_.end()) {
    order_.splice(order_.end(), order_, it->second);
    return;
  }
  if (where_.size() >= static_cast<size_t>(capacity_blocks_)) {
    const uint64_t evicted = order_.front();
    order_.pop_front();
    where_.erase(evicted);
    changes_.push_back({evicted, /*stored=*/false});
  }
  where_.emplace(block, order_.insert(order_.end(), block));
  changes_.push_back({block, /*stored=*/true});
}

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats stats = stats_;
  stats.blocks = static_cast<int>(where_.size());
  return stats;
}

std::vector<CacheChange> PrefixCache::TakeChanges() { return std::exchange(changes_, {}); }

}  // namespace omnistage
