#include "orchestrator/orchestrator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/field_error.h"
#include "common/grpc_util.h"
#include "common/limits.h"
#include "orchestrator/core/request_id.h"

namespace omnistage {

Orchestrator::Orchestrator(OrchestratorOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Orchestrator>> Orchestrator::Start(OrchestratorOptions options) {
  if (options.addresses.size() != options.config.stages.size()) {
    return absl::InvalidArgumentError(absl::StrCat("addresses for ", options.addresses.size(),
                                                   " stages; the pipeline has ",
                                                   options.config.stages.size()));
  }
  std::unique_ptr<Orchestrator> o(new Orchestrator(std::move(options)));
  const PipelineConfig& config = o->options_.config;
  // Every stage starts with no replica; they join on the loop, below.
  o->core_ = std::make_unique<PipelineCore>(
      config, std::vector<std::vector<ReplicaClient*>>(config.stages.size()), &o->loop_);
  o->node_id_ = o->options_.node_id.empty() ? NewNodeId() : o->options_.node_id;
  o->core_->set_node_id(o->node_id_);
  if (absl::Status s = CheckTlsFiles(o->options_.worker_tls, TlsSide::kClient); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("worker TLS: ", s.message()));
  }
  o->replicas_ = std::make_unique<ReplicaSet>(
      &config, o->core_.get(), &o->loop_,
      o->options_.worker_tls.enabled() ? ChannelCredentialsFor(o->options_.worker_tls) : nullptr);
  o->memberships_.resize(config.stages.size());
  std::vector<DnsTarget> targets;
  for (const StageConfig& stage : config.stages) {
    if (!stage.discovery.has_value()) continue;
    o->memberships_[stage.id] = std::make_unique<StageMembership>(
        o->core_->shared_pool(stage.id), absl::StrCat("stage ", stage.id, " (", stage.name, ")"),
        stage.origin(), o->replicas_.get(), &o->loop_);
    targets.push_back({stage.id, stage.discovery->name, stage.discovery->port,
                       stage.discovery->refresh});
  }
  if (absl::Status s = o->StartPeers(&targets); !s.ok()) return s;
  o->loop_.set_lag_observer(
      [metrics = &o->core_->metrics()](absl::Duration lag) { metrics->LoopLag(lag); });
  // A scrape takes a snapshot on the loop (in flight, per replica up and
  // bound) and renders on its own thread; a loop that does not answer within a
  // second leaves the last snapshot's values.
  o->core_->metrics_registry().OnRender([o = o.get()] {
    auto done = std::make_shared<absl::Notification>();
    o->loop_.Post([o, done] {
      o->core_->SnapshotMetrics();
      done->Notify();
    });
    done->WaitForNotificationWithTimeout(absl::Seconds(1));
  });
  if (!o->options_.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
        MetricsServer::Start(o->options_.metrics_listen, &o->core_->metrics_registry());
    if (!metrics.ok()) return metrics.status();
    o->metrics_ = *std::move(metrics);
  }
  std::unique_ptr<TokenFile> tokens;
  if (!o->options_.tokens_file.empty()) {
    absl::StatusOr<std::unique_ptr<TokenFile>> loaded = TokenFile::Load(o->options_.tokens_file);
    if (!loaded.ok()) return loaded.status();
    tokens = *std::move(loaded);
  }
  o->auth_ = std::make_unique<ClientAuth>(std::move(tokens), o->options_.tls.enabled());
  o->router_ = std::make_unique<AbortRouter>(
      o->node_id_,
      LocalAborts{[core = o->core_.get()](const std::string& id, const Caller& caller) {
                    return core->Holds(id, caller);
                  },
                  [core = o->core_.get()](const v1::AbortRequest& request, absl::Time deadline,
                                          AbortDone done, const Caller& caller) {
                    core->Abort(request, deadline, std::move(done), caller);
                  }},
      o->peers_.get(), config.peer_timeout, &o->loop_,
      [metrics = &o->core_->metrics()](absl::StatusCode code) {
        metrics->PeerCall("abort", code);
      });
  o->service_ = std::make_unique<OrchestratorService>(o->core_.get(), &o->loop_, o->auth_.get(),
                                                      o->router_.get(), o->peers_.get(),
                                                      config.peer_timeout);
  o->health_ = std::make_unique<OrchestratorHealth>(o->core_.get(), &o->loop_);
  GrpcServerOptions server_options;
  server_options.address = o->options_.listen;
  server_options.tls = o->options_.tls;
  server_options.name = "the orchestrator";
  server_options.plaintext_health_address = o->options_.health_listen;
  server_options.max_streams_per_connection = config.max_streams_per_connection;
  server_options.min_ping_interval = config.min_client_ping_interval;
  server_options.max_connection_age = config.max_connection_age;
  server_options.max_connection_age_grace = config.max_connection_age_grace;
  // Room for the largest prompt plus the request's other fields; a larger
  // message is refused by gRPC itself (RESOURCE_EXHAUSTED).
  server_options.max_receive_message_bytes = static_cast<int>(
      std::max<int64_t>(4 << 20, static_cast<int64_t>(config.max_prompt_bytes) +
                                     kAddRequestEnvelopeBytes));
  // No built-in health service (readiness_service stays empty): ours answers
  // from the loop (health_service.h).
  absl::StatusOr<StartedServer> started =
      StartGrpcServer(server_options, {o->service_.get(), o->health_.get()});
  if (!started.ok()) return started.status();
  o->server_ = std::move(started->server);
  o->port_ = started->port;
  o->health_port_ = started->health_port;
  if (!o->options_.peer_listen.empty()) {
    o->peer_service_ = std::make_unique<PeerService>(o->core_.get(), &o->loop_);
    GrpcServerOptions peer_options;
    peer_options.address = o->options_.peer_listen;
    peer_options.tls = o->options_.peer_tls;
    peer_options.name = "the orchestrator's peer port";
    absl::StatusOr<StartedServer> peer_started =
        StartGrpcServer(peer_options, {o->peer_service_.get()});
    if (!peer_started.ok()) {
      o->server_->Shutdown();
      return peer_started.status();
    }
    o->peer_server_ = std::move(peer_started->server);
    o->peer_port_ = peer_started->port;
  }
  o->loop_thread_ = std::thread([loop = &o->loop_] { loop->Run(); });
  o->loop_.Post([o = o.get()] {
    if (!o->options_.config.peers.addresses.empty()) {
      o->peers_->Apply(o->options_.config.peers.addresses);
    }
    for (const StageConfig& stage : o->options_.config.stages) {
      StagePool& pool = *o->core_->shared_pool(stage.id);
      for (const std::string& address : o->options_.addresses[stage.id]) {
        ReplicaClient* client = o->replicas_->Create(stage.id, pool.size(), address);
        o->replicas_->Start(stage.id, pool.Add(client, address, stage.origin()));
      }
    }
  });
  if (!targets.empty()) {
    DnsResolverOptions resolver;
    resolver.server = o->options_.dns_server;
    absl::StatusOr<std::unique_ptr<DnsWatcher>> watcher = DnsWatcher::Start(
        resolver, std::move(targets),
        [o = o.get()](int stage, const absl::StatusOr<std::vector<std::string>>& addresses) {
          o->loop_.Post([o, stage, addresses] {
            if (stage == kPeersTarget) {
              o->peers_->Apply(addresses);
            } else {
              o->memberships_[stage]->Apply(addresses);
            }
          });
        });
    if (!watcher.ok()) {
      o->Shutdown();
      return watcher.status();
    }
    o->watcher_ = *std::move(watcher);
  }
  return o;
}

absl::Status Orchestrator::StartPeers(std::vector<DnsTarget>* targets) {
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

Orchestrator::~Orchestrator() { Shutdown(); }

void Orchestrator::RunOnLoop(std::function<void(PipelineCore&)> task) {
  absl::Notification done;
  loop_.Post([&] {
    task(*core_);
    done.Notify();
  });
  done.WaitForNotification();
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

void Orchestrator::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (!loop_thread_.joinable()) return;  // Start() failed before anything ran.
  // Drain while the loop and the server still run: in-flight streams end with
  // their terminal responses, late ones with an abort. Readiness turns
  // NOT_SERVING as the drain begins.
  auto drained = std::make_shared<absl::Notification>();
  loop_.Post([this, drained] {
    core_->Drain(absl::Now() + options_.config.drain_timeout, [drained] { drained->Notify(); });
  });
  drained->WaitForNotificationWithTimeout(options_.config.drain_timeout + absl::Seconds(5));
  if (watcher_ != nullptr) watcher_->Stop();
  metrics_.reset();  // Its scrapes post to the loop: stop them first.
  if (peers_ != nullptr) RunOnLoop([this](PipelineCore&) { peers_->Stop(); });
  server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  if (peer_server_ != nullptr) {
    peer_server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  loop_.Stop();
  loop_thread_.join();
  replicas_->ShutdownAll();
}

}  // namespace omnistage
