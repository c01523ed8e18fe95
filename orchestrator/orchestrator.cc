#include "orchestrator/orchestrator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/allocator.h"
#include "common/field_error.h"
#include "common/limits.h"
#include "common/tracing/trace_metrics.h"
#include "orchestrator/core/request_id.h"

namespace omnistage {

Orchestrator::Orchestrator(OrchestratorOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Orchestrator>> Orchestrator::Start(OrchestratorOptions options) {
  std::unique_ptr<Orchestrator> o(new Orchestrator(std::move(options)));
  std::vector<DnsTarget> targets;
  for (const StageConfig& stage : o->options_.config.stages) {
    if (!stage.discovery.has_value()) continue;
    targets.push_back({stage.id, stage.discovery->name, stage.discovery->port,
                       stage.discovery->refresh});
  }
  // A failure returns here and destroys `o`: the parts made so far stop.
  if (absl::Status s = o->MakeCore(); !s.ok()) return s;
  if (absl::Status s = o->MakePeers(&targets); !s.ok()) return s;
  if (absl::Status s = o->MakeServices(); !s.ok()) return s;
  if (absl::Status s = o->Serve(); !s.ok()) return s;
  if (absl::Status s = o->SpawnWorkers(); !s.ok()) return s;
  o->JoinReplicas();
  if (absl::Status s = o->WatchDns(std::move(targets)); !s.ok()) return s;
  // Spawned workers check the stage defaults at their first Hello: a refusal
  // is a config error, reported before serving anyone.
  std::vector<int> spawned;
  for (const StageConfig& stage : o->options_.config.stages) {
    if (stage.spawn_replicas > 0) spawned.push_back(stage.id);
  }
  if (absl::Status s = o->AwaitHandshakes(spawned, o->options_.handshake_timeout); !s.ok()) {
    return s;
  }
  return o;
}

absl::Status Orchestrator::MakeCore() {
  const PipelineConfig& config = options_.config;
  node_id_ = options_.node_id.empty() ? NewNodeId() : options_.node_id;
  // Every stage starts with no replica; they join on the loop (JoinReplicas,
  // and the DNS watcher for discovered stages).
  core_ = std::make_unique<PipelineCore>(
      config, std::vector<std::vector<ReplicaClient*>>(config.stages.size()), &loop_);
  core_->set_node_id(node_id_);
  core_->set_access_log(options_.access_log);
  core_->set_tracer(options_.tracer.get());
  AddTraceMetrics(&core_->metrics_registry(), options_.tracer.get());
  absl::StatusOr<std::unique_ptr<ReplicaSet>> replicas =
      ReplicaSet::Create(&config, core_.get(), &loop_, options_.worker_tls);
  if (!replicas.ok()) return replicas.status();
  replicas_ = *std::move(replicas);
  memberships_.resize(config.stages.size());
  for (const StageConfig& stage : config.stages) {
    if (!stage.discovery.has_value()) continue;
    memberships_[stage.id] = std::make_unique<StageMembership>(
        core_->shared_pool(stage.id), absl::StrCat("stage ", stage.id, " (", stage.name, ")"),
        stage.origin(), replicas_.get(), &loop_);
  }
  loop_.set_lag_observer(
      [metrics = &core_->metrics()](absl::Duration lag) { metrics->LoopLag(lag); });
  // The free pages a burst left go back to the system once it is over (the
  // allocator's per-thread and central caches stay; common/allocator.h).
  core_->set_on_idle(ReleaseFreeMemory);
  AddHeapMetrics(&core_->metrics_registry());
  // A scrape takes a snapshot on the loop (in flight, per replica up and
  // bound) and renders on its own thread; a loop that does not answer within a
  // second leaves the last snapshot's values.
  core_->metrics_registry().OnRender([this] {
    auto done = std::make_shared<absl::Notification>();
    loop_.Post([this, done] {
      core_->SnapshotMetrics();
      done->Notify();
    });
    done->WaitForNotificationWithTimeout(absl::Seconds(1));
  });
  loop_thread_ = std::make_unique<LoopThread>(&loop_);
  return absl::OkStatus();
}

absl::Status Orchestrator::MakePeers(std::vector<DnsTarget>* targets) {
  const PeersConfig& peers = options_.config.peers;
  if (!peers.enabled()) return absl::OkStatus();
  if (options_.peer_listen.empty()) {
    return absl::InvalidArgumentError(
        "the config lists peers: give this orchestrator a peer port (--peer_listen) for them "
        "to forward aborts to");
  }
  if (options_.peer_tls.enabled()) {
    absl::Status s = CheckTlsFiles(options_.peer_tls, TlsSide::kServer);
    if (s.ok() && options_.peer_tls.ca.empty()) {
      s = absl::InvalidArgumentError(
          "a CA is needed: the peer port takes only peers holding a certificate of it");
    }
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("peer TLS: ", s.message()));
  }
  PeerSetOptions set;
  set.self_node = node_id_;
  if (options_.peer_tls.enabled()) set.credentials = ChannelCredentialsFor(options_.peer_tls);
  if (peers.discovery.has_value()) {
    set.tls_name = peers.discovery->name;
    targets->push_back(
        {kPeersTarget, peers.discovery->name, peers.discovery->port, peers.discovery->refresh});
  }
  peers_ = std::make_unique<PeerSet>(std::move(set), &loop_);
  return absl::OkStatus();
}

absl::Status Orchestrator::MakeServices() {
  absl::StatusOr<std::unique_ptr<ClientAuth>> auth =
      ClientAuth::Create(options_.tokens_file, options_.tls.enabled());
  if (!auth.ok()) return auth.status();
  auth_ = *std::move(auth);
  router_ = std::make_unique<AbortRouter>(
      node_id_,
      LocalAborts{[core = core_.get()](const std::string& id, const Caller& caller) {
                    return core->Holds(id, caller);
                  },
                  [core = core_.get()](const v1::AbortRequest& request, absl::Time deadline,
                                       AbortDone done, const Caller& caller) {
                    core->Abort(request, deadline, std::move(done), caller);
                  }},
      peers_.get(), options_.config.peer_timeout, &loop_,
      [metrics = &core_->metrics()](absl::StatusCode code) { metrics->PeerCall("abort", code); });
  service_ = std::make_unique<OrchestratorService>(core_.get(), &loop_, auth_.get(), router_.get(),
                                                   peers_.get(), options_.config.peer_timeout);
  health_ = std::make_unique<OrchestratorHealth>(core_.get(), &loop_);
  if (!options_.peer_listen.empty()) {
    peer_service_ = std::make_unique<PeerService>(core_.get(), &loop_);
  }
  return absl::OkStatus();
}

absl::Status Orchestrator::Serve() {
  const PipelineConfig& config = options_.config;
  if (!options_.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
        MetricsServer::Start(options_.metrics_listen, &core_->metrics_registry());
    if (!metrics.ok()) return metrics.status();
    metrics_ = *std::move(metrics);
  }
  GrpcServerOptions server;
  server.address = options_.listen;
  server.tls = options_.tls;
  server.tls_flags = options_.tls_flags;
  server.name = "the orchestrator";
  server.plaintext_health_address = options_.health_listen;
  server.max_streams_per_connection = config.max_streams_per_connection;
  server.min_ping_interval = config.min_client_ping_interval;
  server.max_connection_age = config.max_connection_age;
  server.max_connection_age_grace = config.max_connection_age_grace;
  // Room for the largest prompt plus the request's other fields; a larger
  // message is refused by gRPC itself (RESOURCE_EXHAUSTED).
  server.max_receive_message_bytes = static_cast<int>(std::max<int64_t>(
      4 << 20, static_cast<int64_t>(config.max_prompt_bytes) + kAddRequestEnvelopeBytes));
  // No built-in health service (readiness_service stays empty): ours answers
  // from the loop (health_service.h).
  absl::StatusOr<StartedServer> started =
      StartGrpcServer(server, {service_.get(), health_.get()});
  if (!started.ok()) return started.status();
  server_ = {ServingServer(started->server.release()), started->port, started->health_port};
  if (peer_service_ == nullptr) return absl::OkStatus();
  GrpcServerOptions peer;
  peer.address = options_.peer_listen;
  peer.tls = options_.peer_tls;
  peer.tls_flags = "peer TLS";
  peer.name = "the orchestrator's peer port";
  absl::StatusOr<StartedServer> peer_started = StartGrpcServer(peer, {peer_service_.get()});
  if (!peer_started.ok()) return peer_started.status();
  peer_server_ = {ServingServer(peer_started->server.release()), peer_started->port, 0};
  return absl::OkStatus();
}

absl::Status Orchestrator::SpawnWorkers() {
  std::vector<std::string> args = options_.worker_args;
  const TlsFiles& tls = options_.worker_tls;
  if (!tls.cert.empty()) {
    // Spawned workers serve with the orchestrator's own certificate (it must
    // name 127.0.0.1) and take sessions only from holders of the CA's.
    args.push_back("--tls_cert=" + tls.cert);
    args.push_back("--tls_key=" + tls.key);
    args.push_back("--tls_client_ca=" + tls.ca);
  }
  absl::StatusOr<std::unique_ptr<LocalWorkers>> workers = LocalWorkers::Start(
      options_.config,
      options_.worker_binary.empty() ? DefaultWorkerBinary() : options_.worker_binary, args);
  if (!workers.ok()) return workers.status();
  workers_ = *std::move(workers);
  return absl::OkStatus();
}

void Orchestrator::JoinReplicas() {
  loop_.Post([this] {
    if (!options_.config.peers.addresses.empty()) peers_->Apply(options_.config.peers.addresses);
    for (const StageConfig& stage : options_.config.stages) {
      StagePool& pool = *core_->shared_pool(stage.id);
      for (const std::string& address : workers_->addresses()[stage.id]) {
        ReplicaClient* client = replicas_->Create(stage.id, pool.size(), address);
        replicas_->Start(stage.id, pool.Add(client, address, stage.origin()));
      }
    }
  });
}

absl::Status Orchestrator::WatchDns(std::vector<DnsTarget> targets) {
  if (targets.empty()) return absl::OkStatus();
  DnsResolverOptions resolver;
  resolver.server = options_.dns_server;
  absl::StatusOr<std::unique_ptr<DnsWatcher>> watcher = DnsWatcher::Start(
      resolver, std::move(targets),
      [this](int stage, const absl::StatusOr<std::vector<std::string>>& addresses) {
        loop_.Post([this, stage, addresses] {
          if (stage == kPeersTarget) {
            peers_->Apply(addresses);
          } else {
            memberships_[stage]->Apply(addresses);
          }
        });
      });
  if (!watcher.ok()) return watcher.status();
  watcher_ = *std::move(watcher);
  return absl::OkStatus();
}

Orchestrator::~Orchestrator() {
  if (loop_thread_ == nullptr) return;  // Nothing ran yet.
  Drain();
  // Calls to peers end before the servers and the loop they answer on.
  if (peers_ != nullptr) loop_thread_->RunAndWait([this] { peers_->Stop(); });
}

void Orchestrator::RunOnLoop(std::function<void(PipelineCore&)> task) {
  loop_thread_->RunAndWait([&] { task(*core_); });
}

absl::Status Orchestrator::AwaitHandshakes(const std::vector<int>& stages,
                                           absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::Status refusal;
    bool waiting = false;
    RunOnLoop([&](PipelineCore& core) {
      for (int s : stages) {
        const StagePool& pool = core.pool(s);
        for (int r = 0; r < pool.size() && refusal.ok(); ++r) {
          const ReplicaState& state = pool.state(r);
          if (state.alive) continue;
          // A refused Hello names the field it refused; other failures are
          // the network's or the worker's and may pass.
          const absl::Status& down = state.down_reason;
          if (!down.ok() && !ErrorField(down).empty()) {
            refusal = AtField(WithMessage(down, absl::StrCat(down.message(), " (stage ", s, " (",
                                                             options_.config.stages[s].name,
                                                             ") replica ", r, ")")),
                              absl::StrCat("stages[", s, "]"));
          }
          waiting = true;
        }
      }
    });
    if (!refusal.ok() || !waiting || absl::Now() >= deadline) return refusal;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

void Orchestrator::Drain() {
  if (drained_ || loop_thread_ == nullptr) return;
  drained_ = true;
  // In-flight streams end with their terminal responses, late ones with an
  // abort, while the loop and the server still run. Readiness turns
  // NOT_SERVING as the drain begins.
  auto drained = std::make_shared<absl::Notification>();
  loop_.Post([this, drained] {
    core_->Drain(absl::Now() + options_.config.drain_timeout, [drained] { drained->Notify(); });
  });
  drained->WaitForNotificationWithTimeout(options_.config.drain_timeout + absl::Seconds(5));
}

}  // namespace omnistage
