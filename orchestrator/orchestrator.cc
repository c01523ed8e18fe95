#include "orchestrator/orchestrator.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/field_error.h"
#include "common/grpc_util.h"
#include "common/limits.h"

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
  std::vector<std::vector<ReplicaClient*>> replicas;
  for (size_t s = 0; s < o->options_.addresses.size(); ++s) {
    o->stubs_.emplace_back();
    o->sessions_.emplace_back();
    replicas.emplace_back();
    for (size_t r = 0; r < o->options_.addresses[s].size(); ++r) {
      WorkerChannelOptions channel;
      channel.address = o->options_.addresses[s][r];
      channel.keepalive_time = config.keepalive_time;
      channel.keepalive_timeout = config.keepalive_timeout;
      channel.reconnect_initial_backoff = config.reconnect_initial_backoff;
      channel.reconnect_max_backoff = config.reconnect_max_backoff;
      o->stubs_[s].push_back(std::make_unique<GrpcWorkerStub>(channel, &o->loop_));
      ReplicaSessionOptions session;
      session.stage = static_cast<int>(s);
      session.replica = static_cast<int>(r);
      session.defaults = config.stages[s].defaults;
      session.reconnect_initial_backoff = config.reconnect_initial_backoff;
      session.reconnect_max_backoff = config.reconnect_max_backoff;
      o->sessions_[s].push_back(
          std::make_unique<ReplicaSession>(session, o->stubs_[s].back().get(), &o->loop_));
      replicas[s].push_back(o->sessions_[s].back().get());
    }
  }
  o->core_ = std::make_unique<PipelineCore>(o->options_.config, std::move(replicas), &o->loop_);
  for (size_t s = 0; s < o->sessions_.size(); ++s) {
    for (size_t r = 0; r < o->sessions_[s].size(); ++r) {
      o->sessions_[s][r]->set_listener(o->core_.get());
      o->core_->set_replica_address(static_cast<int>(s), static_cast<int>(r),
                                    o->options_.addresses[s][r]);
    }
  }
  o->service_ = std::make_unique<OrchestratorService>(o->core_.get(), &o->loop_);
  o->health_ = std::make_unique<OrchestratorHealth>(o->core_.get(), &o->loop_);
  GrpcServerOptions server_options;
  server_options.address = o->options_.listen;
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
  o->loop_thread_ = std::thread([loop = &o->loop_] { loop->Run(); });
  o->loop_.Post([o = o.get()] {
    for (auto& stage : o->sessions_) {
      for (auto& session : stage) session->Start();
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
  server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  loop_.Stop();
  loop_thread_.join();
  for (auto& stage : stubs_) {
    for (auto& stub : stage) stub->Shutdown();
  }
}

}  // namespace omnistage
