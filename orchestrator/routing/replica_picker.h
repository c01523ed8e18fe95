// ReplicaPicker: where a stage's unbound request goes (docs/routing.md): to
// its session's last replica while that one is live and has a free slot
// (session_affinity.h), else by the stage's policy: round robin over the live
// replicas, the least loaded per capacity (the workers' load reports plus what
// was sent since), or the prefix-aware pick (prefix_pick.h: where the
// request's input costs least, from the picker's PrefixIndex). Ties and the
// search order rotate, so equal replicas share the requests.
//
// Not thread-safe: owned by its StagePool, on the orchestrator's loop.
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_PICKER_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_PICKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "google/protobuf/repeated_field.h"
#include "orchestrator/config/pick_policy.h"
#include "orchestrator/routing/prefix_index.h"
#include "orchestrator/routing/replica_state.h"
#include "orchestrator/routing/session_affinity.h"
#include "protos/common.pb.h"

namespace omnistage {

// What a pick may use besides the request id: the request's session and input
// (for session affinity and the prefix-aware pick) and the time.
struct PickContext {
  std::string session;
  const google::protobuf::RepeatedPtrField<v1::Payload>* input = nullptr;
  absl::Time now = absl::InfinitePast();
  // Replicas predicted to make the request miss its latency objective: left
  // out of the pick while another live one is not (session and prefix
  // included).
  std::vector<int> avoid = {};
};

// How one unbound request was placed (metrics and logs): `why` is
// "round_robin", "least_loaded", "session", "prefix", "no_match" or
// "balance" (the prefix-aware pick fell back to least loaded); the tokens are
// the prefix-aware pick's (0 otherwise).
struct PickDecision {
  int replica = -1;
  const char* why = "";
  int64_t matched_tokens = 0;
  int64_t input_tokens = 0;
};

class ReplicaPicker {
 public:
  void set_policy(PickPolicy policy, const PrefixPickOptions& prefix);
  PickPolicy policy() const { return policy_; }

  // Of `live` (ascending indices into `replicas`, not empty), the replica for
  // a new request.
  PickDecision Choose(const std::vector<int>& live, const std::vector<ReplicaState>& replicas,
                      const PickContext& context);
  // The request went to `replica`: the rotation moves on, and its session (if
  // any) remembers the replica.
  void Picked(int replica, const PickContext& context);

  // What each replica's prefix cache holds, as far as the picker knows.
  PrefixIndex& prefix_index() { return prefix_index_; }
  const PrefixIndex& prefix_index() const { return prefix_index_; }

 private:
  // Of `live`, the least loaded per capacity, searched from the rotation.
  int LeastLoaded(const std::vector<int>& live, const std::vector<ReplicaState>& replicas) const;

  PickPolicy policy_ = PickPolicy::kRoundRobin;
  uint64_t rotation_ = 0;
  PrefixIndex prefix_index_{PrefixPickOptions()};
  SessionAffinity sessions_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_PICKER_H_
