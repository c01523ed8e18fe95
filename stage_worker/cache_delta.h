// CacheDelta: changes to an engine's prefix cache that a session has not been
// told yet, in the form WorkerLoad.cache carries them (v1::CacheEvents,
// protos/stage_worker.proto; docs/engines.md, "Prefix cache"):
//
// - Changes: per block its latest change, stored or evicted, so a block is in
//   at most one of the two lists. A receiver applies them to what it knew.
// - A snapshot: every block the cache holds; the receiver forgets what it knew.
//   A change after a snapshot keeps it one: a stored block joins it, an evicted
//   one leaves it.
//
// Apply() adds what came later, so a delta can gather one engine's changes
// step after step (CacheReports) or merge two reports queued for one session
// into one (ConnectSession's writer) and say what the two said in turn.
//
// Not thread-safe.
#ifndef OMNISTAGE_STAGE_WORKER_CACHE_DELTA_H_
#define OMNISTAGE_STAGE_WORKER_CACHE_DELTA_H_

#include <cstddef>
#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

class CacheDelta {
 public:
  // No change.
  CacheDelta() = default;
  // What `events` say.
  explicit CacheDelta(const v1::CacheEvents& events) { Apply(events); }

  // One change, after those already here.
  void Apply(uint64_t block, bool stored);
  // A report that came after those already here: a snapshot replaces them.
  void Apply(const v1::CacheEvents& events);

  bool snapshot() const { return snapshot_; }
  // Blocks it names.
  size_t size() const { return latest_.size(); }
  v1::CacheEvents ToProto() const;

 private:
  bool snapshot_ = false;
  absl::flat_hash_map<uint64_t, bool> latest_;  // block -> stored (a snapshot: only true)
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_CACHE_DELTA_H_
