#include "orchestrator/service/orchestrator_service.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_util.h"
#include "common/retry_hint.h"
#include "orchestrator/service/client_stream.h"
#include "orchestrator/peers/cluster_status.h"
#include "orchestrator/service/unary_finish.h"

namespace omnistage {
namespace {

// One Generate call: the transport under its ClientStream.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse>,
                              public ClientStream::Transport {
 public:
  GenerateReactor(grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop,
                  v1::GenerateRequest request, Caller caller)
      : context_(context),
        stream_(std::make_shared<ClientStream>(
            this,
            [core, loop](std::shared_ptr<ClientStream> stream, const std::string& id) {
              loop->Post([core, stream, id] { core->Cancel(id, stream.get()); });
            },
            [metrics = &core->metrics()](int64_t delta) { metrics->QueuedBytes(delta); },
            core->config().max_client_queued_bytes)) {
    // A W3C traceparent in the call's metadata follows the request to every
    // stage and onto every log line about it.
    std::string traceparent;
    auto it = context->client_metadata().find("traceparent");
    if (it != context->client_metadata().end()) {
      traceparent.assign(it->second.data(), it->second.size());
    }
    loop->Post([core, stream = stream_, request = std::move(request),
                traceparent = std::move(traceparent), caller = std::move(caller)]() mutable {
      core->Generate(std::move(request), stream, std::move(traceparent), std::move(caller));
    });
  }

  // ClientStream::Transport.
  void BeginWrite(const v1::GenerateResponse* response) override { StartWrite(response); }
  void FinishStream(const absl::Status& status) override {
    // A refusal of the moment says when to come back (also in the status
    // details, as google.rpc.RetryInfo).
    if (std::optional<absl::Duration> after = RetryAfterOf(status)) {
      context_->AddTrailingMetadata(kRetryAfterMsTrailer,
                                    absl::StrCat(absl::ToInt64Milliseconds(*after)));
    }
    Finish(ToGrpcStatus(status));
  }
  void CancelStream() override { context_->TryCancel(); }

  // Reactor.
  void OnWriteDone(bool ok) override { stream_->OnWriteDone(ok); }
  void OnCancel() override { stream_->OnCancel(); }
  void OnDone() override { delete this; }

 private:
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<ClientStream> stream_;
};

// A Generate call refused before it started (not authenticated).
class RefusedGenerate final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit RefusedGenerate(const absl::Status& status) { Finish(ToGrpcStatus(status)); }
  void OnDone() override { delete this; }
};

}  // namespace

absl::StatusOr<Caller> OrchestratorService::Authenticated(
    const grpc::CallbackServerContext& context, absl::string_view call) const {
  absl::StatusOr<Caller> caller = auth_->Authenticate(context);
  if (!caller.ok()) core_->metrics().AuthRefused(call, caller.status().code());
  return caller;
}

absl::Status OrchestratorService::Admitted(const grpc::CallbackServerContext& context,
                                           absl::string_view call) const {
  absl::StatusOr<Caller> caller = Authenticated(context, call);
  if (!caller.ok()) return caller.status();
  absl::Status allowed = ClientAuth::RequireAdmin(*caller, call);
  if (!allowed.ok()) core_->metrics().AuthRefused(call, allowed.code());
  return allowed;
}

grpc::ServerWriteReactor<v1::GenerateResponse>* OrchestratorService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  absl::StatusOr<Caller> caller = Authenticated(*context, "Generate");
  if (!caller.ok()) return new RefusedGenerate(caller.status());
  return new GenerateReactor(context, core_, loop_, *request, *std::move(caller));
}

grpc::ServerUnaryReactor* OrchestratorService::Abort(grpc::CallbackServerContext* context,
                                                     const v1::AbortRequest* request,
                                                     v1::AbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<Caller> caller = Authenticated(*context, "Abort");
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  const absl::Time deadline = DeadlineOf(*context);
  loop_->Post([router = router_, request, response, reactor, deadline,
               caller = *std::move(caller)] {
    router->Abort(*request, deadline, FinishWith(reactor, response), caller);
  });
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::GetPipelineStatus(
    grpc::CallbackServerContext* context, const v1::PipelineStatusRequest* request,
    v1::PipelineStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status allowed = Admitted(*context, "GetPipelineStatus"); !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  const absl::Time deadline = std::min(DeadlineOf(*context), absl::Now() + peer_timeout_);
  loop_->Post([core = core_, peers = peers_, cluster = request->cluster(), response, reactor,
               deadline] {
    if (!cluster) {
      *response = core->Status();
      reactor->Finish(grpc::Status::OK);
      return;
    }
    AskCluster(core->Status(), peers, deadline, [response, reactor](v1::PipelineStatus status) {
      *response = std::move(status);
      reactor->Finish(grpc::Status::OK);
    });
  });
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::CallStageUtility(
    grpc::CallbackServerContext* context, const v1::StageUtilityRequest* request,
    v1::StageUtilityResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status allowed = Admitted(*context, "CallStageUtility"); !allowed.ok()) {
    reactor->Finish(ToGrpcStatus(allowed));
    return reactor;
  }
  loop_->Post([core = core_, request, response, reactor] {
    core->CallStageUtility(*request, FinishWith(reactor, response));
  });
  return reactor;
}

}  // namespace omnistage
