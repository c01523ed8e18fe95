#include "tests/orchestrator_cluster.h"

#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/testing/free_port.h"

namespace omnistage {

absl::StatusOr<std::unique_ptr<OrchestratorCluster>> OrchestratorCluster::Start(
    PipelineSpec spec, int orchestrators, std::vector<std::string> flags) {
  constexpr int kAttempts = 3;
  absl::StatusOr<std::unique_ptr<OrchestratorCluster>> cluster;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    cluster = StartOnce(spec, orchestrators, flags);
    if (cluster.ok()) break;
    std::fprintf(stderr, "orchestrator cluster, try %d of %d: %s\n", attempt, kAttempts,
                 std::string(cluster.status().message()).c_str());
  }
  return cluster;
}

absl::StatusOr<std::unique_ptr<OrchestratorCluster>> OrchestratorCluster::StartOnce(
    PipelineSpec spec, int orchestrators, const std::vector<std::string>& flags) {
  std::unique_ptr<OrchestratorCluster> cluster(new OrchestratorCluster());
  std::vector<int> peer_ports;
  std::vector<std::string> quoted;
  for (int i = 0; i < orchestrators; ++i) {
    peer_ports.push_back(FreeLoopbackPort());
    quoted.push_back(absl::StrCat("\"127.0.0.1:", peer_ports.back(), "\""));
  }
  spec.peers = absl::StrCat("{addresses: [", absl::StrJoin(quoted, ", "), "]}");
  spec.orchestrator_flags.push_back(absl::StrCat("--peer_listen=127.0.0.1:", peer_ports[0]));
  spec.orchestrator_flags.push_back("--metrics_listen=127.0.0.1:0");
  spec.orchestrator_flags.insert(spec.orchestrator_flags.end(), flags.begin(), flags.end());
  absl::StatusOr<std::unique_ptr<PipelineHarness>> pipeline = PipelineHarness::Start(spec);
  if (!pipeline.ok()) return pipeline.status();
  cluster->pipeline_ = *std::move(pipeline);
  Member first;
  first.node_id = ListeningLineIn(cluster->pipeline_->orchestrator()->output()).Field("node");
  first.metrics_port = cluster->pipeline_->orchestrator_metrics_port();
  first.peer_port = peer_ports[0];
  first.stub = cluster->pipeline_->stub();
  cluster->members_.push_back(std::move(first));
  for (int i = 1; i < orchestrators; ++i) {
    if (absl::Status s = cluster->StartMember(peer_ports[i], flags); !s.ok()) return s;
  }
  // Up: each one reaches every other (a peer probed before it listened is
  // reached on the channel's next attempt).
  for (int i = 0; i < orchestrators; ++i) {
    std::string last;
    const bool meshed = Eventually(
        [&] {
          absl::StatusOr<v1::PipelineStatus> status = cluster->Status(i, /*cluster=*/true);
          if (!status.ok()) return false;
          last = status->DebugString();
          if (status->orchestrators_size() != orchestrators) return false;
          for (const v1::OrchestratorStatus& o : status->orchestrators()) {
            if (!o.reachable()) return false;
          }
          return true;
        },
        absl::Seconds(30));
    if (!meshed) {
      return absl::DeadlineExceededError(
          absl::StrCat("orchestrator ", i, " does not reach its peers: ", last));
    }
  }
  return cluster;
}

OrchestratorCluster::~OrchestratorCluster() {
  // The extra orchestrators first, then the harness (orchestrator 0, workers).
  for (Member& member : members_) member.process.reset();
}

absl::Status OrchestratorCluster::StartMember(int peer_port,
                                              const std::vector<std::string>& flags) {
  const PipelineSpec& spec = pipeline_->spec();
  std::vector<std::string> argv = {kOrchestratorBinary,
                                   absl::StrCat("--config=", pipeline_->config_path()),
                                   "--listen=127.0.0.1:0",
                                   absl::StrCat("--peer_listen=127.0.0.1:", peer_port),
                                   "--metrics_listen=127.0.0.1:0",
                                   absl::StrCat("--stage_worker=", kStageWorkerBinary)};
  if (!spec.dns_server.empty()) argv.push_back(absl::StrCat("--dns_server=", spec.dns_server));
  argv.insert(argv.end(), flags.begin(), flags.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
  if (!process.ok()) return process.status();
  Member member;
  member.peer_port = peer_port;
  member.process = *std::move(process);
  absl::StatusOr<std::string> line =
      member.process->WaitForLine("listening port=", absl::Seconds(30));
  if (!line.ok()) {
    return absl::Status(line.status().code(),
                        absl::StrCat("orchestrator ", members_.size(),
                                     " did not start: ", line.status().message()));
  }
  const ListeningLine listening = ListeningLineIn(*line);
  member.node_id = listening.Field("node");
  member.metrics_port = listening.Number("metrics_port");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  member.stub = v1::Orchestrator::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", listening.port), grpc::InsecureChannelCredentials(), args));
  members_.push_back(std::move(member));
  // Serving once every replica is alive in its own status.
  const int i = size() - 1;
  const bool ready = Eventually(
      [&] {
        absl::StatusOr<v1::PipelineStatus> status = Status(i);
        if (!status.ok()) return false;
        for (const v1::StageStatus& stage : status->stages()) {
          for (const v1::ReplicaStatus& replica : stage.replicas()) {
            if (!replica.alive()) return false;
          }
        }
        return true;
      },
      absl::Seconds(30));
  return ready ? absl::OkStatus()
               : absl::DeadlineExceededError(absl::StrCat("orchestrator ", i, " never saw every "
                                                          "replica alive"));
}

std::unique_ptr<GenerateCall> OrchestratorCluster::StartGenerate(
    int via, const v1::GenerateRequest& request, absl::Duration deadline) {
  return std::make_unique<GenerateCall>(members_[via].stub, request, deadline);
}

absl::StatusOr<v1::AbortResponse> OrchestratorCluster::Abort(int via,
                                                             const std::vector<std::string>& ids,
                                                             absl::Duration deadline) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  v1::AbortRequest request;
  for (const std::string& id : ids) request.add_request_ids(id);
  v1::AbortResponse response;
  grpc::Status status = members_[via].stub->Abort(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return response;
}

absl::StatusOr<v1::PipelineStatus> OrchestratorCluster::Status(int via, bool cluster) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::PipelineStatusRequest request;
  request.set_cluster(cluster);
  v1::PipelineStatus response;
  grpc::Status status = members_[via].stub->GetPipelineStatus(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return response;
}

void OrchestratorCluster::Kill(int i) { members_[i].process.reset(); }

}  // namespace omnistage
