// Orchestrator: a running orchestrator — its event loop thread, PipelineCore,
// the replicas' sessions (ReplicaSet), the DNS watcher and a StageMembership
// per discovered stage, and the gRPC server (Orchestrator service, health,
// reflection). Used by the binary and by in-process tests.
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
#include "orchestrator/dns_watcher.h"
#include "orchestrator/health_service.h"
#include "orchestrator/orchestrator_service.h"
#include "orchestrator/pipeline_config.h"
#include "orchestrator/pipeline_core.h"
#include "orchestrator/replica_set.h"
#include "orchestrator/stage_membership.h"

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
};

class Orchestrator {
 public:
  static absl::StatusOr<std::unique_ptr<Orchestrator>> Start(OrchestratorOptions options);
  ~Orchestrator();

  int port() const { return port_; }
  // The plaintext health port; 0 when there is none.
  int health_port() const { return health_port_; }
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

  const OrchestratorOptions options_;
  EventLoop loop_;
  std::unique_ptr<PipelineCore> core_;
  std::unique_ptr<ReplicaSet> replicas_;
  // memberships_[s]: set for discovered stages only.
  std::vector<std::unique_ptr<StageMembership>> memberships_;
  std::unique_ptr<DnsWatcher> watcher_;
  std::unique_ptr<ClientAuth> auth_;
  std::unique_ptr<OrchestratorService> service_;
  std::unique_ptr<OrchestratorHealth> health_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;
  int port_ = 0;
  int health_port_ = 0;
  std::thread loop_thread_;
  bool shut_down_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ORCHESTRATOR_H_
