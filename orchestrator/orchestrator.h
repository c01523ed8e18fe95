// Orchestrator: a running orchestrator, composed of its parts — the workers it
// spawns (LocalWorkers), the event loop and its thread, PipelineCore, the
// replicas' sessions (ReplicaSet), a StageMembership per discovered stage and
// the DNS watcher, the peers (PeerSet, AbortRouter, the peer port), client
// authentication, the gRPC server (Orchestrator service, health, reflection)
// and the metrics endpoint. The binary's main() parses flags into options and
// runs one.
//
//   absl::StatusOr<std::unique_ptr<Orchestrator>> orchestrator = Orchestrator::Start(options);
//   ... clients call 127.0.0.1:(*orchestrator)->port() ...
//   (*orchestrator)->Drain();   // stop admitting, let requests finish
//   orchestrator->reset();      // every part stops, the spawned workers last
//
// Each part is made by its own Create/Start, which checks what it is given
// and owns its threads; Start makes them in turn and returns the first error,
// and whatever was made by then stops as the Orchestrator is destroyed, in the
// reverse order of the members below. No part's check is repeated elsewhere.
#ifndef OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_H_
#define OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/event_loop.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/tls.h"
#include "common/metrics_server.h"
#include "common/tracing/tracer.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/discovery/dns_watcher.h"
#include "orchestrator/peers/abort_router.h"
#include "orchestrator/peers/peer_service.h"
#include "orchestrator/peers/peer_set.h"
#include "orchestrator/replicas/local_workers.h"
#include "orchestrator/replicas/replica_set.h"
#include "orchestrator/replicas/stage_membership.h"
#include "orchestrator/service/client_auth.h"
#include "orchestrator/service/health_service.h"
#include "orchestrator/service/orchestrator_service.h"

namespace omnistage {

struct OrchestratorOptions {
  PipelineConfig config;
  // The stage_worker binary started for the stages the config spawns
  // (`replicas: N`), and flags every such worker gets besides its own (the log
  // format and level). Empty binary: the one next to this program.
  std::string worker_binary;
  std::vector<std::string> worker_args;
  // How long Start waits for the spawned workers' first Hello, whose refusal
  // of the stage's defaults is a config error.
  absl::Duration handshake_timeout = absl::Seconds(10);
  // host:port of the DNS server discovery asks; empty: the system's
  // configuration (/etc/resolv.conf).
  std::string dns_server;
  // host:port for clients; port 0 picks one.
  std::string listen = "127.0.0.1:0";
  // host:port of the Prometheus endpoint (/metrics); empty: none.
  std::string metrics_listen;
  // An info line per finished request (finished_requests.h).
  bool access_log = true;
  // TLS for clients (with tls.ca: client certificates required); plaintext
  // when empty. `tls_flags` names them in errors.
  TlsFiles tls;
  std::string tls_flags = "--tls_cert/--tls_key/--tls_client_ca";
  // TLS to the workers: the CA their certificates must chain to, and the
  // client certificate presented to them (mTLS); plaintext when empty. Spawned
  // workers serve with that certificate, requiring it from their clients.
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
  // Where the requests' spans go (orchestrator/core/request_tracing.h); null:
  // nowhere.
  std::shared_ptr<const Tracer> tracer;
};

class Orchestrator {
 public:
  // Makes every part and waits for the spawned workers' first Hello. Errors
  // about the config's content carry its field path (common/field_error.h):
  // a spawned worker refusing its engine or parameters, or the stage defaults.
  static absl::StatusOr<std::unique_ptr<Orchestrator>> Start(OrchestratorOptions options);
  // Drain(), then every part stops: DNS, metrics, the servers, the loop, the
  // replicas' sessions, the spawned workers.
  ~Orchestrator();

  int port() const { return server_.port; }
  // The plaintext health port; 0 when there is none.
  int health_port() const { return server_.health_port; }
  // The peer port; 0 when there is none.
  int peer_port() const { return peer_server_.port; }
  // The tag of the request ids this orchestrator generates.
  const std::string& node_id() const { return node_id_; }
  // The metrics endpoint's port; 0 when it is off.
  int metrics_port() const { return metrics_ == nullptr ? 0 : metrics_->port(); }

  // Stops admitting (health NOT_SERVING), lets in-flight requests finish for
  // the config's drain_timeout and aborts the rest. Idempotent.
  void Drain();

  // Runs `task` on the event loop and waits for it (tests and status).
  void RunOnLoop(std::function<void(PipelineCore&)> task);

 private:
  // A started gRPC server and its ports; destroying it shuts it down.
  struct Serving {
    ServingServer server;
    int port = 0;
    int health_port = 0;
  };

  explicit Orchestrator(OrchestratorOptions options);
  // The parts, in the order Start makes them.
  absl::Status MakeCore();
  absl::Status MakePeers(std::vector<DnsTarget>* targets);
  absl::Status MakeServices();
  absl::Status Serve();
  absl::Status SpawnWorkers();
  void JoinReplicas();
  absl::Status WatchDns(std::vector<DnsTarget> targets);
  // Waits (up to `timeout`) until every replica of `stages` has answered its
  // first Hello. Returns the first refusal with the config field it is about
  // ("stages[1]") and the replica in the message; OK otherwise, also on timeout.
  absl::Status AwaitHandshakes(const std::vector<int>& stages, absl::Duration timeout);

  const OrchestratorOptions options_;
  std::string node_id_;
  // Destroyed in the reverse order: the spawned workers last, after the loop
  // and the sessions to them; the DNS watcher first.
  std::unique_ptr<LocalWorkers> workers_;
  EventLoop loop_;
  std::unique_ptr<PipelineCore> core_;
  std::unique_ptr<ReplicaSet> replicas_;
  // memberships_[s]: set for discovered stages only.
  std::vector<std::unique_ptr<StageMembership>> memberships_;
  std::unique_ptr<ClientAuth> auth_;
  // Null without `peers:` in the config.
  std::unique_ptr<PeerSet> peers_;
  std::unique_ptr<AbortRouter> router_;
  std::unique_ptr<OrchestratorService> service_;
  std::unique_ptr<OrchestratorHealth> health_;
  std::unique_ptr<PeerService> peer_service_;
  std::unique_ptr<LoopThread> loop_thread_;
  Serving server_;
  Serving peer_server_;
  std::unique_ptr<MetricsServer> metrics_;
  std::unique_ptr<DnsWatcher> watcher_;
  bool drained_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_H_
