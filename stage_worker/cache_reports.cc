#include "stage_worker/cache_reports.h"

#include <algorithm>

namespace omnistage {

CacheReports::CacheReports(int capacity_blocks)
    : max_pending_(
          std::max(kMinMaxPending, 4 * static_cast<size_t>(std::max(capacity_blocks, 0)))) {}

v1::CacheEvents CacheReports::SnapshotLocked() const {
  v1::CacheEvents events;
  events.set_snapshot(true);
  events.mutable_stored()->Reserve(static_cast<int>(held_.size()));
  for (uint64_t block : held_) events.add_stored(block);
  return events;
}

v1::CacheEvents CacheReports::Join(uint64_t session) {
  absl::MutexLock lock(&mu_);
  pending_[session] = Pending();
  return SnapshotLocked();
}

void CacheReports::Leave(uint64_t session) {
  absl::MutexLock lock(&mu_);
  pending_.erase(session);
}

void CacheReports::Apply(const std::vector<CacheChange>& changes) {
  if (changes.empty()) return;
  absl::MutexLock lock(&mu_);
  for (const CacheChange& change : changes) {
    if (change.stored) {
      held_.insert(change.block);
    } else {
      held_.erase(change.block);
    }
  }
  for (auto& [session, pending] : pending_) {
    for (const CacheChange& change : changes) {
      if (pending.resnapshot) break;
      pending.delta.Apply(change.block, change.stored);
      if (pending.delta.size() > max_pending_) {
        pending.delta = CacheDelta();
        pending.resnapshot = true;
      }
    }
  }
}

std::optional<v1::CacheEvents> CacheReports::Take(uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(session);
  if (it == pending_.end()) return std::nullopt;
  Pending& pending = it->second;
  if (pending.resnapshot) {
    pending.resnapshot = false;
    return SnapshotLocked();
  }
  if (pending.delta.size() == 0) return std::nullopt;
  v1::CacheEvents events = pending.delta.ToProto();
  pending.delta = CacheDelta();
  return events;
}

}  // namespace omnistage
