#include "orchestrator/peers/cluster_status.h"

#include <memory>
#include <string>

namespace omnistage {
namespace {

// The freshest load of replica `replica` of stage `stage` among the peers'
// answers, when fresher than its own.
void TakeFresherLoad(int stage, v1::ReplicaStatus* replica,
                     const std::vector<PeerAnswer>& answers) {
  for (const auto& [peer, answer] : answers) {
    if (!answer.ok()) continue;
    for (const v1::StageStatus& theirs : answer->status().stages()) {
      if (theirs.stage_id() != stage) continue;
      for (const v1::ReplicaStatus& other : theirs.replicas()) {
        if (other.address() != replica->address() || other.load_age_ms() < 0) continue;
        if (replica->load_age_ms() >= 0 && replica->load_age_ms() <= other.load_age_ms()) continue;
        replica->set_load_requests(other.load_requests());
        replica->set_load_age_ms(other.load_age_ms());
        replica->set_load_seen_by(answer->node_id());
      }
    }
  }
}

}  // namespace

v1::PipelineStatus MergeClusterStatus(v1::PipelineStatus own,
                                      const std::vector<PeerAnswer>& answers) {
  own.set_cluster(true);
  v1::OrchestratorStatus* self = own.add_orchestrators();
  self->set_node_id(own.node_id());
  self->set_reachable(true);
  self->set_in_flight_requests(own.in_flight_requests());
  self->set_accepting(own.accepting());
  for (const auto& [peer, answer] : answers) {
    v1::OrchestratorStatus* entry = own.add_orchestrators();
    entry->set_peer_address(peer.address);
    entry->set_node_id(peer.node_id);
    entry->set_reachable(answer.ok());
    if (!answer.ok()) {
      entry->set_error(std::string(answer.status().message()));
      continue;
    }
    entry->set_node_id(answer->node_id());
    entry->set_in_flight_requests(answer->status().in_flight_requests());
    entry->set_accepting(answer->status().accepting());
  }
  for (v1::StageStatus& stage : *own.mutable_stages()) {
    for (v1::ReplicaStatus& replica : *stage.mutable_replicas()) {
      if (replica.load_age_ms() >= 0) replica.set_load_seen_by(own.node_id());
      TakeFresherLoad(stage.stage_id(), &replica, answers);
    }
  }
  return own;
}

void AskCluster(v1::PipelineStatus own, PeerCalls* peers, absl::Time deadline,
                std::function<void(v1::PipelineStatus)> done) {
  std::vector<PeerInfo> listed;
  if (peers != nullptr) listed = peers->Peers();
  if (listed.empty()) {
    done(MergeClusterStatus(std::move(own), {}));
    return;
  }
  struct Gather {
    v1::PipelineStatus own;
    std::vector<PeerAnswer> answers;
    size_t pending = 0;
    std::function<void(v1::PipelineStatus)> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->own = std::move(own);
  gather->done = std::move(done);
  gather->pending = listed.size();
  for (const PeerInfo& peer : listed) {
    gather->answers.emplace_back(peer, absl::UnknownError("no answer"));
  }
  for (size_t p = 0; p < listed.size(); ++p) {
    peers->Status(listed[p].address, deadline,
                  [gather, p](absl::StatusOr<v1::PeerStatusResponse> answer) {
                    gather->answers[p].second = std::move(answer);
                    if (--gather->pending > 0) return;
                    gather->done(MergeClusterStatus(std::move(gather->own), gather->answers));
                  });
  }
}

}  // namespace omnistage
