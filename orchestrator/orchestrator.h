// Orchestrator: a running orchestrator — its event loop thread, PipelineCore,
// the replicas' sessions (ReplicaSet), the DNS watcher and a StageMembership
// per discovered stage, the peers (PeerSet, AbortRouter, the peer port), and
// the gRPC server (Orchestrator service, health, reflection). Used by the
// binary and by in-process tests.
//
//   auto orchestrator = Orchestrator::Start(options);
//   ... clients call 127.0.0.1:(*orchestrator)->port() ...
//   (*orchestrator)->Shutdown();   // drain, then stop
#ifndef OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_H_
#define OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/metrics_server.h"
#include "common/tls.h"
#include "grpcpp/grpcpp.h"
#include "orchestrator/peers/abort_router.h"
#include "orchestrator/discovery/dns_watcher.h"
#include "orchestrator/service/health_service.h"
#include "orchestrator/service/orchestrator_service.h"
#include "orchestrator/peers/peer_service.h"
#include "orchestrator/peers/peer_set.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/replicas/replica_set.h"
#include "orchestrator/replicas/stage_membership.h"

namespace omnistage {

struct OrchestratorOptions {
  PipelineConfig config;
  // addresses[s][r]: where replica r of stage s listens (host:port); empty for
  // a stage whose replicas come from `discovery:`.
  std::vector<std::vector<std::string>> addresses;
  // host:port of the DNS server discovery asks; empty: the system's
  // configuration (/etc/resolv.conf).
  std::string dns_server;
  // host:port for clients; port 0 picks one.
  std::string listen = "127.0.0.1:0";
  // host:port of the Prometheus endpoint (/metrics); empty: none.
  std::string metrics_listen;
  // TLS for clients (with tls.ca: client certificates required); plaintext
  // when empty.
  TlsFiles tls;
  // TLS to the workers: the CA their certificates must chain to, and the
  // client certificate presented to them (mTLS); plaintext when empty.
  TlsFiles worker_tls;
  // The bearer tokens clients must send (token_file.h); empty: none needed.
  std::string tokens_file;
  // host:port of a plaintext port that answers health checks only, for the
  // kubelet's probes when `tls` is on; empty: none.
  std::string health_listen;
  // host:port of the peer port (OrchestratorPeer: forwarded aborts, status)
  // that the config's `peers:` reach this orchestrator at; empty: none.
  std::string peer_listen;
  // Mutual TLS between peers: the peer port serves with cert/key and takes
  // only callers with a certificate chaining to ca; calls to peers present
  // cert/key and check the peer against ca. Plaintext when empty.
  TlsFiles peer_tls;
  // This orchestrator's node id (request_id.h); empty: a new random one.
  std::string node_id;
};

class Orchestrator {
 public:
  static absl::StatusOr<std::unique_ptr<Orchestrator>> Start(OrchestratorOptions options);
  ~Orchestrator();

  int port() const { return port_; }
  // The plaintext health port; 0 when there is none.
  int health_port() const { return health_port_; }
  // The peer port; 0 when there is none.
  int peer_port() const { return peer_port_; }
  // The tag of the request ids this orchestrator generates.
  const std::string& node_id() const { return node_id_; }
  // The metrics endpoint's port; 0 when it is off.
  int metrics_port() const { return metrics_ == nullptr ? 0 : metrics_->port(); }
  // Waits (up to `timeout`) until every replica of `stages` has answered its
  // first Hello. Returns the first refusal (e.g. stage defaults the engine does
  // not take) with the config field it is about ("stages[1].defaults.extra.voice")
  // and the replica in the message; OK otherwise, also on timeout.
  absl::Status AwaitHandshakes(const std::vector<int>& stages, absl::Duration timeout);
  // Stops admitting (health NOT_SERVING), lets in-flight requests finish for the
  // config's drain_timeout, aborts the rest, then stops the server, the loop and
  // the replica sessions. Idempotent.
  void Shutdown();

  // Runs `task` on the event loop and waits for it (tests and status).
  void RunOnLoop(std::function<void(PipelineCore&)> task);

 private:
  explicit Orchestrator(OrchestratorOptions options);
  // Makes the PeerSet when the config has `peers:` (adding the peers' DNS
  // name to `targets` when they are discovered).
  absl::Status StartPeers(std::vector<DnsTarget>* targets);

  const OrchestratorOptions options_;
  EventLoop loop_;
  std::unique_ptr<PipelineCore> core_;
  std::unique_ptr<ReplicaSet> replicas_;
  // memberships_[s]: set for discovered stages only.
  std::vector<std::unique_ptr<StageMembership>> memberships_;
  std::unique_ptr<DnsWatcher> watcher_;
  std::unique_ptr<ClientAuth> auth_;
  // Null without `peers:` in the config.
  std::unique_ptr<PeerSet> peers_;
  std::unique_ptr<AbortRouter> router_;
  std::unique_ptr<OrchestratorService> service_;
  std::unique_ptr<PeerService> peer_service_;
  std::unique_ptr<grpc::Server> peer_server_;
  std::unique_ptr<OrchestratorHealth> health_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;
  std::string node_id_;
  int port_ = 0;
  int health_port_ = 0;
  int peer_port_ = 0;
  std::thread loop_thread_;
  bool shut_down_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_H_
