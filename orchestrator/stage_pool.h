// StagePool: the replicas of one pipeline stage and which request lives on which.
//
// Semantics (ARCHITECTURE.md §3, seed P04):
// - Pick(rid): bound to a live replica -> that one (sticky; the round-robin counter
//   does not move); otherwise live[rr % live.size()], rr += 1, and bind. No live
//   replica -> UNAVAILABLE ("NoLiveReplica").
// - Bound(rid) is read-only; Release(rid) tolerates unknown ids.
// - Evict(replica): mark dead, drop and return its bindings; never picked again
//   until Revive() (a new incarnation, with no bindings).
// - Abort(ids): group ids by bound replica (unbound ids ignored, replicas with no
//   ids not called), one call per replica, in replica order, one after another; a
//   group's bindings are released only after its call succeeded; a failure stops
//   there and is returned, the failed and not-yet-called groups stay bound. Ids
//   evicted or released before their replica's turn are left out of its call.
//
// Not thread-safe: owned by the orchestrator's event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_STAGE_POOL_H_
#define OMNISTAGE_ORCHESTRATOR_STAGE_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "orchestrator/replica_client.h"

namespace omnistage {

class StagePool : public std::enable_shared_from_this<StagePool> {
 public:
  // `replicas` are not owned and must outlive the pool. All start alive when
  // `alive` is true, else dead until Revive().
  StagePool(int stage_id, std::vector<ReplicaClient*> replicas, bool alive = true);

  int stage_id() const { return stage_id_; }
  int size() const { return static_cast<int>(replicas_.size()); }
  ReplicaClient* replica(int index) const { return replicas_[index]; }

  absl::StatusOr<int> Pick(const std::string& request_id);
  std::optional<int> Bound(const std::string& request_id) const;
  void Release(const std::string& request_id);
  // Returns the ids that were bound to `replica`, sorted.
  std::vector<std::string> Evict(int replica);
  // The replica answers again: live, with no bindings.
  void Revive(int replica);
  bool alive(int replica) const { return alive_[replica]; }
  // Ascending indices of live replicas.
  std::vector<int> LiveReplicas() const;
  int BoundCount(int replica) const;
  size_t bindings() const { return bindings_.size(); }

  // Asynchronous; `done` runs once, after the last call (or the first failure).
  // The pool must be held by a shared_ptr while an abort runs.
  void Abort(const std::vector<std::string>& request_ids, std::function<void(absl::Status)> done);

 private:
  struct AbortRun;
  void AbortNext(std::shared_ptr<AbortRun> run);

  const int stage_id_;
  const std::vector<ReplicaClient*> replicas_;
  std::vector<bool> alive_;
  absl::flat_hash_map<std::string, int> bindings_;
  uint64_t rr_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_STAGE_POOL_H_
