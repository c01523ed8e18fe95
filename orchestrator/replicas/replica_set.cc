#include "orchestrator/replicas/replica_set.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace omnistage {

ReplicaSet::ReplicaSet(const PipelineConfig* config, ReplicaListener* listener, Scheduler* loop,
                       std::shared_ptr<grpc::ChannelCredentials> credentials)
    : config_(config), credentials_(std::move(credentials)), listener_(listener), loop_(loop) {}

absl::StatusOr<std::unique_ptr<ReplicaSet>> ReplicaSet::Create(const PipelineConfig* config,
                                                               ReplicaListener* listener,
                                                               Scheduler* loop,
                                                               const TlsFiles& worker_tls) {
  if (absl::Status s = CheckTlsFiles(worker_tls, TlsSide::kClient); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("worker TLS: ", s.message()));
  }
  return std::make_unique<ReplicaSet>(
      config, listener, loop,
      worker_tls.enabled() ? ChannelCredentialsFor(worker_tls) : nullptr);
}

ReplicaSet::~ReplicaSet() { ShutdownAll(); }

ReplicaClient* ReplicaSet::Create(int stage, int replica, const std::string& address) {
  WorkerChannelOptions channel;
  channel.address = address;
  channel.credentials = credentials_;
  // A discovered replica is dialled at the IP its DNS name gave: its
  // certificate must carry that name, as written in the config.
  if (config_->stages[stage].discovery.has_value()) {
    channel.tls_name = config_->stages[stage].discovery->name;
  }
  channel.keepalive_time = config_->keepalive_time;
  channel.keepalive_timeout = config_->keepalive_timeout;
  channel.reconnect_initial_backoff = config_->reconnect_initial_backoff;
  channel.reconnect_max_backoff = config_->reconnect_max_backoff;
  ReplicaSessionOptions session;
  session.stage = stage;
  session.replica = replica;
  session.defaults = config_->stages[stage].defaults;
  session.want_cache_events = config_->stages[stage].pick == PickPolicy::kPrefixAware &&
                              config_->stages[stage].prefix.precise;
  session.reconnect_initial_backoff = config_->reconnect_initial_backoff;
  session.reconnect_max_backoff = config_->reconnect_max_backoff;
  if (stage == 0) {
    session.needed_message_bytes =
        static_cast<int64_t>(config_->max_prompt_bytes) + kAddRequestEnvelopeBytes;
  }
  Replica& r = replicas_[{stage, replica}];
  r.stub = std::make_unique<GrpcWorkerStub>(channel, loop_);
  r.session = std::make_unique<ReplicaSession>(session, r.stub.get(), loop_);
  r.session->set_listener(listener_);
  return r.session.get();
}

void ReplicaSet::Start(int stage, int replica) { replicas_.at({stage, replica}).session->Start(); }

void ReplicaSet::Destroy(int stage, int replica) {
  auto it = replicas_.find({stage, replica});
  if (it == replicas_.end()) return;
  it->second.session->Close(absl::UnavailableError("the replica left its stage"));
  // gRPC lets go of the cancelled stream within moments; what it still posts
  // to the loop holds its own references and finds the session gone.
  it->second.stub->Shutdown();
  replicas_.erase(it);
}

void ReplicaSet::ShutdownAll() {
  for (auto& [key, replica] : replicas_) replica.stub->Shutdown();
}

}  // namespace omnistage
