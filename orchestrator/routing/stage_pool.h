// StagePool: the replicas of one pipeline stage, which request lives on which,
// and every call the orchestrator makes to those replicas.
//
// Binding semantics (docs/architecture.md, StagePool):
// - Pick(rid): bound to a live replica -> that one (sticky; the round-robin counter
//   does not move); otherwise live[rr % live.size()], rr += 1, and bind. No live
//   replica -> UNAVAILABLE ("NoLiveReplica"). With PickPolicy::kLeastLoaded the
//   unbound case takes the live replica with the lowest load per capacity
//   instead (the workers' reports: ReportLoad), still sticky once bound; with
//   kPrefixAware, the one where the request's input costs least
//   (prefix_pick.h, from the pool's PrefixIndex). A request with a session key
//   (PickContext) goes to the replica of its session's last request while that
//   one is live and has a free slot, whatever the policy (session_affinity.h).
//   Replicas the context says to avoid (predicted to miss the request's
//   latency objective) are left out first, unless that leaves none.
// - Bound(rid) is read-only; Release(rid) tolerates unknown ids.
// - Evict(replica): mark dead, drop and return its bindings; never picked again
//   until Revive() (a new incarnation, with no bindings).
// - Drain(replica): still alive, its bindings stay and their requests go on, but
//   it leaves the live list: not picked for new requests (until Revive()).
//
// Membership (replicas that come and go, e.g. from DNS): Add() appends a replica,
// dead until its handshake; indices are never reused, so appending changes nothing
// for bindings that exist. Retire(replica) takes it off the live list for good
// (a handshake does not bring it back; Unretire() does); once it holds no
// binding (at once, or when its last request ends or it dies) its `idle`
// callback runs, once, and the owner may Remove() it: the pool forgets its
// client, and status no longer lists it.
// - Abort(ids): group ids by bound replica (unbound ids ignored, replicas with no
//   ids not called), one call per replica, all issued at once; a group's bindings
//   are released only after its call succeeded; a failed group stays bound so the
//   abort can be retried, and the other groups go ahead. The result names each
//   failed replica with the ids it kept. Ids evicted or released while their call
//   was in flight are neither released again nor reported as failed, also when
//   the id is bound again meanwhile, even to the same replica: a call answers
//   for the bindings it was made for only.
//
// Sends: Submit() picks and sends an AddRequest; a replica whose session turns
// out closed is evicted on the spot (as if its stream had broken: its bound
// requests are returned to the caller to fail) and the next live one is tried, so
// a request that has not started anywhere never fails for a replica that died a
// moment ago. Append() and CallUtility() go to the bound / every replica.
//
// Costs: Pick, Bound, Release are O(1); Evict is O(k log k) in the replica's k
// bindings; Abort is linear in its ids.
//
// Not thread-safe: owned by the orchestrator's event loop.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_STAGE_POOL_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_STAGE_POOL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/routing/prefix_index.h"
#include "orchestrator/routing/replica_client.h"
#include "orchestrator/routing/replica_picker.h"
#include "orchestrator/routing/replica_state.h"
#include "orchestrator/routing/stage_demand.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// A replica found dead while sending to it: evicted, with the requests that were
// bound to it (sorted), which the caller must fail.
struct ReplicaLoss {
  int replica = -1;
  absl::Status reason;
  std::vector<std::string> evicted;
};

// One replica's Abort call that failed, and the ids it still holds.
struct ReplicaAbortFailure {
  int replica = -1;
  absl::Status status;
  std::vector<std::string> ids;
};

struct PoolAbortResult {
  int stage = 0;
  // In replica order; empty when every call succeeded.
  std::vector<ReplicaAbortFailure> failures;
  // OK, or the first failure, as "stage S replica R: abort failed: ...".
  absl::Status status() const;
};

// Per replica: its index and what its utility call returned.
using UtilityResults = std::vector<std::pair<int, absl::StatusOr<google::protobuf::Value>>>;

struct SubmitResult {
  // OK when sent. Else UNAVAILABLE (no live replica) or the refusal of `replica`.
  absl::Status status;
  // Where it was sent or which replica refused it; -1 when none was live.
  int replica = -1;
  // Replicas found dead on the way (already evicted).
  std::vector<ReplicaLoss> lost;
};

class StagePool : public std::enable_shared_from_this<StagePool> {
 public:
  // `replicas` are not owned and must outlive the pool (or their Remove()). All
  // start alive when `alive` is true, else dead until Revive().
  StagePool(int stage_id, std::vector<ReplicaClient*> replicas, bool alive = true);

  int stage_id() const { return stage_id_; }
  int size() const { return static_cast<int>(replicas_.size()); }

  // ---- Bindings (docs/architecture.md, StagePool) ----
  absl::StatusOr<int> Pick(const std::string& request_id, const PickContext& context = {});
  std::optional<int> Bound(const std::string& request_id) const;
  void Release(const std::string& request_id);
  // Returns the ids that were bound to `replica`, sorted.
  std::vector<std::string> Evict(int replica);
  // The replica answers again: live, with no bindings.
  void Revive(int replica);
  bool alive(int replica) const { return states_[replica].alive; }
  // Takes an alive replica off the live list; its bound requests go on.
  void Drain(int replica) { states_[replica].draining = true; }
  // ---- Membership ----
  // Appends a replica (dead until Admit()); returns its index. `client` is not
  // owned and must stay valid until Remove().
  int Add(ReplicaClient* client, std::string address, std::string origin);
  // See above. `idle` runs on the calling thread from inside whichever pool
  // call released the last binding: defer real work.
  void Retire(int replica, std::function<void()> idle);
  // Wanted again before it was removed: back on the live list once alive.
  void Unretire(int replica);
  // Forgets a retired replica that holds no binding.
  void Remove(int replica);
  // Runs for every Abort call sent to a replica (metrics); no-op by default.
  void set_on_abort_call(std::function<void(int replica)> on_call) {
    on_abort_call_ = std::move(on_call);
  }
  // Runs for every Abort call a replica answered: of the ids it carried, how
  // many the worker found live and stopped, and how many had already ended
  // there (an abort that raced the request's own end). No-op by default.
  using AbortAnswer = std::function<void(int replica, size_t stopped, size_t already_ended)>;
  void set_on_abort_answer(AbortAnswer on_answer) { on_abort_answer_ = std::move(on_answer); }
  void set_pick(PickPolicy pick, const PrefixPickOptions& prefix = {}) {
    picker_.set_policy(pick, prefix);
  }
  // Runs for every unbound request placed by Pick (metrics); no-op by default.
  void set_on_pick(std::function<void(const PickDecision&)> on_pick) {
    on_pick_ = std::move(on_pick);
  }
  // The worker's load report (from its Ready or a step), received at `at`.
  void ReportLoad(int replica, int requests, absl::Time at);
  // The worker's prefix-cache changes (WorkerLoad.cache), for a precise
  // prefix-aware pick.
  void ReportCache(int replica, const v1::CacheEvents& events);
  const PrefixIndex& prefix_index() const { return picker_.prefix_index(); }
  // The last discovery failure of this stage ("" after a success), for status.
  void set_discovery_error(std::string error) { discovery_error_ = std::move(error); }

  // Ascending indices of live replicas (alive, not draining, not retiring).
  std::vector<int> LiveReplicas() const;
  bool IsLive(int replica) const { return states_[replica].live(); }
  bool HasLiveReplica() const;
  // Whether a live replica has room for one more request: what this pool has
  // bound to it plus what others hold there (its last report) is below its
  // capacity plus `headroom`. A replica that reports no capacity always has.
  bool HasFreeSlot(int headroom) const;
  // Whether a live replica has room for one more request of work that can
  // wait: it holds fewer than its capacity x (1 - `reserve`) (at least one
  // slot when the reserve leaves none). A replica that reports no capacity
  // always has.
  bool HasBatchSlot(double reserve) const;
  int BoundCount(int replica) const { return static_cast<int>(bound_[replica].size()); }
  // The ids bound to `replica`.
  const absl::flat_hash_set<std::string>& BoundTo(int replica) const { return bound_[replica]; }
  size_t bindings() const { return bindings_.size(); }
  // What the stage holds now and has taken since it began, for its
  // autoscaling signal (stage_demand.h); `waiting` counts only the requests
  // bound beyond a replica's capacity. Busy slot seconds are counted only
  // with a clock (set_clock), from when it was set.
  StageLoad Load() const;
  void set_clock(std::function<absl::Time()> now) {
    now_ = std::move(now);
    busy_since_ = now_();
  }

  // Asynchronous; `done` runs once, after the last call completed. The pool
  // must be held by a shared_ptr while an abort runs.
  void Abort(const std::vector<std::string>& request_ids, absl::Time call_deadline,
             std::function<void(PoolAbortResult)> done);

  // ---- Replica identity and health ----
  const ReplicaState& state(int replica) const { return states_[replica]; }
  void set_address(int replica, std::string address) {
    states_[replica].address = std::move(address);
  }
  // A handshake: records the incarnation and revives the replica.
  void Admit(int replica, const v1::Ready& ready);
  // The replica is down for `reason`: recorded, then evicted (see Evict).
  std::vector<std::string> MarkDown(int replica, const absl::Status& reason);
  // One ReplicaStatus per replica not removed, in order; load ages are
  // measured to `now`.
  void AppendStatus(v1::StageStatus* stage, absl::Time now) const;

  // ---- Sends ----
  // Picks a replica for add->request_id() and sends it there (see above). On
  // success `*add` was moved from and the request is bound to result.replica.
  // `prepare`, when given, runs for the picked replica before the send and may
  // change `*add` for it; a non-OK status refuses that replica (nothing is
  // sent, no binding stays) and is the result.
  using Prepare = std::function<absl::Status(const ReplicaState& replica, v1::AddRequest* add)>;
  // `context.input` is taken from `*add`.
  SubmitResult Submit(v1::AddRequest* add, const Prepare& prepare = nullptr,
                      PickContext context = {});
  // Sends more input to the replica `input.request_id()` is bound to. NOT_FOUND
  // when it is bound nowhere (nothing sent); a lost replica lands in `*lost`.
  absl::Status Append(v1::AppendInput input, std::optional<ReplicaLoss>* lost);
  // Tells the replica bound to `request_id`, if it takes them, that its
  // listener runs out of audio `slack` from now (docs/architecture.md,
  // "Playback deadlines"). Advice: nothing happens when it cannot be sent.
  void SendPlaybackDeadline(const std::string& request_id, absl::Duration slack);
  // Calls utility `name` on every alive replica; `done` gets one result per
  // replica not removed, in replica order, with its index (UNAVAILABLE for a
  // replica that is not alive).
  void CallUtility(const std::string& name, const google::protobuf::ListValue& args,
                   std::function<void(UtilityResults)> done);

 private:
  struct AbortRun;
  // One binding: where, and which Bind() made it (an id bound again after a
  // release or an eviction is another binding, also on the same replica).
  struct Binding {
    int replica = -1;
    uint64_t generation = 0;
  };
  // (id, generation) of the bindings one Abort call is for.
  using BindingRefs = std::vector<std::pair<std::string, uint64_t>>;
  void Bind(const std::string& request_id, int replica);
  // Of `refs`, the ids whose binding is still that one.
  std::vector<std::string> StillBound(const BindingRefs& refs) const;
  // Runs a retiring replica's idle callback once it holds no binding.
  void CheckIdle(int replica);

  const int stage_id_;
  // replicas_[r] is null once r is removed.
  std::vector<ReplicaClient*> replicas_;
  std::vector<ReplicaState> states_;
  absl::flat_hash_map<std::string, Binding> bindings_;
  uint64_t next_generation_ = 1;
  // Bindings made and ended since the pool began (StageLoad).
  uint64_t entries_ = 0;
  uint64_t departures_ = 0;
  // The capacity the last handshake reported (0: none yet).
  int last_capacity_ = 0;
  // Busy slot seconds (requests held within capacity, over time) until
  // busy_since_, counted at every change of what is held (AccrueBusy).
  std::function<absl::Time()> now_;
  double busy_slot_seconds_ = 0;
  absl::Time busy_since_;
  // Requests alive replicas hold within their capacity now.
  int HeldWithinCapacity() const;
  // Counts the busy slot seconds up to now; before every change of bindings
  // or of a replica's life or capacity.
  void AccrueBusy();
  // bound_[r]: the ids bound to replica r (the same bindings, indexed by replica).
  std::vector<absl::flat_hash_set<std::string>> bound_;
  ReplicaPicker picker_;
  std::function<void(const PickDecision&)> on_pick_ = [](const PickDecision&) {};
  // idle_[r]: a retiring replica's callback, until it has run.
  absl::flat_hash_map<int, std::function<void()>> idle_;
  std::string discovery_error_;
  std::function<void(int replica)> on_abort_call_ = [](int) {};
  AbortAnswer on_abort_answer_ = [](int, size_t, size_t) {};
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_STAGE_POOL_H_
