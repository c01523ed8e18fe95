// CacheReports: a Worker's reports of its engine's prefix cache to the
// sessions that asked for them (Hello.want_cache_events; docs/engines.md,
// "Prefix cache").
//
// - A mirror of the blocks the cache holds, kept from the changes the engine
//   gives after each step (Engine::TakeCacheChanges(), on the busy-loop
//   thread), so that a session opening on a gRPC thread gets its snapshot
//   without touching the engine.
// - Per session, the changes it has not been told yet (CacheDelta: a block's
//   latest change wins), taken for its next step event. A session that falls
//   behind by more than max_pending() blocks has them dropped, and its next
//   report is a snapshot of the mirror instead: memory per session stays
//   bounded by the cache's size.
//
// A session joins once (its snapshot is the state its changes start from) and
// leaves when it closes. Thread-safe; it calls nothing while it holds its lock.
#ifndef OMNISTAGE_STAGE_WORKER_CACHE_REPORTS_H_
#define OMNISTAGE_STAGE_WORKER_CACHE_REPORTS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/cache_delta.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

class CacheReports {
 public:
  // A pending set's bound: 4 times the cache's capacity, at least this.
  static constexpr size_t kMinMaxPending = 1024;

  // For an engine whose cache holds up to `capacity_blocks`.
  explicit CacheReports(int capacity_blocks);

  size_t max_pending() const { return max_pending_; }

  // Starts the reports to session `session`; the snapshot its Ready carries.
  v1::CacheEvents Join(uint64_t session) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends them. Idempotent.
  void Leave(uint64_t session) ABSL_LOCKS_EXCLUDED(mu_);
  // The engine's changes since the previous call, oldest first.
  void Apply(const std::vector<CacheChange>& changes) ABSL_LOCKS_EXCLUDED(mu_);
  // What `session` has not been told, for its next event (then nothing);
  // nullopt when there is nothing, or it has not joined.
  std::optional<v1::CacheEvents> Take(uint64_t session) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Pending {
    CacheDelta delta;
    // Fell behind: the next report is a snapshot; changes until then are not kept.
    bool resnapshot = false;
  };

  v1::CacheEvents SnapshotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_pending_;
  mutable absl::Mutex mu_;
  absl::flat_hash_set<uint64_t> held_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_CACHE_REPORTS_H_
