// OrchestratorCluster: several orchestrator processes sharing one set of
// workers, peers of each other, for multi-process tests of their
// semantics (forwarded aborts, isolation, kill -9 of one orchestrator,
// cluster status, load-aware picking).
//
// Orchestrator 0 is the PipelineHarness's own (it starts the workers); the
// others run the same config file (its `peers:` lists every peer port, each
// orchestrator recognises itself) with their own client and peer ports, all
// with --metrics_listen. Every process is stopped by PID when the cluster goes
// away, also when a test fails.
//
//   auto cluster = OrchestratorCluster::Start(spec, /*orchestrators=*/3);
//   auto call = (*cluster)->StartGenerate(0, MakeRequest("", "hi"));
//   (*cluster)->Abort(/*via=*/1, {id});   // forwarded to orchestrator 0
//   (*cluster)->Kill(2);
#ifndef OMNISTAGE_TESTS_ORCHESTRATOR_CLUSTER_H_
#define OMNISTAGE_TESTS_ORCHESTRATOR_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/testing/child_process.h"
#include "protos/orchestrator.grpc.pb.h"
#include "tests/pipeline_harness.h"

namespace omnistage {

class OrchestratorCluster {
 public:
  // `flags`: more flags for every orchestrator (e.g. --peer_tls_*). The peer
  // ports are picked before the orchestrators start (each config lists them
  // all), so another process may take one meanwhile: a cluster that does not
  // start is started again on fresh ports, up to three times in all.
  static absl::StatusOr<std::unique_ptr<OrchestratorCluster>> Start(
      PipelineSpec spec, int orchestrators, std::vector<std::string> flags = {});
  ~OrchestratorCluster();

  // The workers, and orchestrator 0.
  PipelineHarness& pipeline() { return *pipeline_; }
  int size() const { return static_cast<int>(members_.size()); }
  const std::string& node_id(int i) const { return members_[i].node_id; }
  int peer_port(int i) const { return members_[i].peer_port; }
  int metrics_port(int i) const { return members_[i].metrics_port; }
  std::shared_ptr<v1::Orchestrator::Stub> stub(int i) const { return members_[i].stub; }

  std::unique_ptr<GenerateCall> StartGenerate(int via, const v1::GenerateRequest& request,
                                              absl::Duration deadline = absl::Seconds(60));
  absl::StatusOr<v1::AbortResponse> Abort(int via, const std::vector<std::string>& ids,
                                          absl::Duration deadline = absl::Seconds(20));
  absl::StatusOr<v1::PipelineStatus> Status(int via, bool cluster = false);
  // kill -9 and reap orchestrator `i` (not 0: it is the harness's).
  void Kill(int i);

 private:
  struct Member {
    std::unique_ptr<ChildProcess> process;  // Null for orchestrator 0.
    std::string node_id;
    int peer_port = 0;
    int metrics_port = 0;
    std::shared_ptr<v1::Orchestrator::Stub> stub;
  };
  OrchestratorCluster() = default;
  // One try of Start().
  static absl::StatusOr<std::unique_ptr<OrchestratorCluster>> StartOnce(
      PipelineSpec spec, int orchestrators, const std::vector<std::string>& flags);
  // Starts orchestrator i (>0) on `peer_port`, with `flags`.
  absl::Status StartMember(int peer_port, const std::vector<std::string>& flags);

  std::unique_ptr<PipelineHarness> pipeline_;
  std::vector<Member> members_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_ORCHESTRATOR_CLUSTER_H_
