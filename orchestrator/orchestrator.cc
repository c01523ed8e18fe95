#include "orchestrator/orchestrator.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/grpc_util.h"

namespace omnistage {

Orchestrator::Orchestrator(OrchestratorOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<Orchestrator>> Orchestrator::Start(OrchestratorOptions options) {
  const PipelineConfig& config = options.config;
  if (options.addresses.size() != config.stages.size()) {
    return absl::InvalidArgumentError(absl::StrCat("addresses for ", options.addresses.size(),
                                                   " stages; the pipeline has ",
                                                   config.stages.size()));
  }
  std::unique_ptr<Orchestrator> o(new Orchestrator(std::move(options)));
  std::vector<std::vector<ReplicaClient*>> replicas;
  for (size_t s = 0; s < o->options_.addresses.size(); ++s) {
    o->clients_.emplace_back();
    replicas.emplace_back();
    for (size_t r = 0; r < o->options_.addresses[s].size(); ++r) {
      ReplicaClientOptions client;
      client.stage = static_cast<int>(s);
      client.replica = static_cast<int>(r);
      client.address = o->options_.addresses[s][r];
      client.keepalive_time = config.keepalive_time;
      client.keepalive_timeout = config.keepalive_timeout;
      client.reconnect_initial_backoff = config.reconnect_initial_backoff;
      client.reconnect_max_backoff = config.reconnect_max_backoff;
      o->clients_[s].push_back(std::make_unique<GrpcReplicaClient>(client, &o->loop_));
      replicas[s].push_back(o->clients_[s].back().get());
    }
  }
  o->core_ = std::make_unique<PipelineCore>(o->options_.config, std::move(replicas), &o->loop_);
  for (size_t s = 0; s < o->clients_.size(); ++s) {
    for (size_t r = 0; r < o->clients_[s].size(); ++r) {
      o->clients_[s][r]->set_listener(o->core_.get());
      o->core_->set_replica_address(static_cast<int>(s), static_cast<int>(r),
                                    o->options_.addresses[s][r]);
    }
  }
  o->service_ = std::make_unique<OrchestratorService>(o->core_.get(), &o->loop_);
  GrpcServerOptions server_options;
  server_options.address = o->options_.listen;
  server_options.max_receive_message_bytes =
      static_cast<int>(std::max<size_t>(4 << 20, 2 * config.max_prompt_bytes));
  absl::StatusOr<StartedServer> started = StartGrpcServer(server_options, {o->service_.get()});
  if (!started.ok()) return started.status();
  o->server_ = std::move(started->server);
  o->port_ = started->port;
  o->loop_thread_ = std::thread([loop = &o->loop_] { loop->Run(); });
  o->loop_.Post([o = o.get()] {
    for (auto& stage : o->clients_) {
      for (auto& client : stage) client->Start();
    }
  });
  return o;
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

void Orchestrator::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (!loop_thread_.joinable()) return;  // Start() failed before anything ran.
  SetServing(server_.get(), false);
  // Drain while the loop and the server still run: in-flight streams end with
  // their terminal responses, late ones with an abort.
  auto drained = std::make_shared<absl::Notification>();
  loop_.Post([this, drained] {
    core_->Drain(absl::Now() + options_.config.drain_timeout, [drained] { drained->Notify(); });
  });
  drained->WaitForNotificationWithTimeout(options_.config.drain_timeout + absl::Seconds(5));
  server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  loop_.Stop();
  loop_thread_.join();
  for (auto& stage : clients_) {
    for (auto& client : stage) client->Shutdown();
  }
}

}  // namespace omnistage
