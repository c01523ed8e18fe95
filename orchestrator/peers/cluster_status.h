// The cluster's status: this orchestrator's own, with every peer's in-flight
// count and the freshest load report any orchestrator has for each replica.
//
//   AskCluster(core.Status(), peers, deadline, [](v1::PipelineStatus s) { ... });
//
// The stages and replicas listed are the answering orchestrator's view; a
// replica's load is taken from whichever orchestrator heard from the worker
// last (matched by stage and address), named in load_seen_by. A peer that does
// not answer by the deadline is listed unreachable, with why.
#ifndef OMNISTAGE_ORCHESTRATOR_PEERS_CLUSTER_STATUS_H_
#define OMNISTAGE_ORCHESTRATOR_PEERS_CLUSTER_STATUS_H_

#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "orchestrator/peers/peer_set.h"
#include "protos/orchestrator.pb.h"
#include "protos/orchestrator_peer.pb.h"

namespace omnistage {

// One peer and its answer (or why none came).
using PeerAnswer = std::pair<PeerInfo, absl::StatusOr<v1::PeerStatusResponse>>;

// `own` (with its node_id set) marked as the cluster's, with `answers` merged in.
v1::PipelineStatus MergeClusterStatus(v1::PipelineStatus own,
                                      const std::vector<PeerAnswer>& answers);

// Asks every peer (`peers` may be null: then only `own`), then calls `done`
// with the merged status, on the loop PeerCalls posts to.
void AskCluster(v1::PipelineStatus own, PeerCalls* peers, absl::Time deadline,
                std::function<void(v1::PipelineStatus)> done);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_PEERS_CLUSTER_STATUS_H_
