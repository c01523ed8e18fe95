#include "stage_worker/cache_delta.h"

namespace omnistage {

void CacheDelta::Apply(uint64_t block, bool stored) {
  if (snapshot_ && !stored) {
    latest_.erase(block);
  } else {
    latest_[block] = stored;
  }
}

void CacheDelta::Apply(const v1::CacheEvents& events) {
  if (events.snapshot()) {
    snapshot_ = true;
    latest_.clear();
  }
  for (uint64_t block : events.stored()) Apply(block, true);
  for (uint64_t block : events.evicted()) Apply(block, false);
}

v1::CacheEvents CacheDelta::ToProto() const {
  v1::CacheEvents events;
  events.set_snapshot(snapshot_);
  for (const auto& [block, stored] : latest_) {
    if (stored) {
      events.add_stored(block);
    } else {
      events.add_evicted(block);
    }
  }
  return events;
}

}  // namespace omnistage
