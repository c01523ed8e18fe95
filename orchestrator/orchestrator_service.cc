#include "orchestrator/orchestrator_service.h"

#include <functional>
#include <memory>
#include <utility>

#include "common/grpc_util.h"
#include "orchestrator/client_stream.h"

namespace omnistage {
namespace {

// One Generate call: the transport under its ClientStream.
class GenerateReactor final : public grpc::ServerWriteReactor<v1::GenerateResponse>,
                              public ClientStream::Transport {
 public:
  GenerateReactor(grpc::CallbackServerContext* context, PipelineCore* core, EventLoop* loop,
                  v1::GenerateRequest request)
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
                traceparent = std::move(traceparent)]() mutable {
      core->Generate(std::move(request), stream, std::move(traceparent));
    });
  }

  // ClientStream::Transport.
  void BeginWrite(const v1::GenerateResponse* response) override { StartWrite(response); }
  void FinishStream(const absl::Status& status) override { Finish(ToGrpcStatus(status)); }
  void CancelStream() override { context_->TryCancel(); }

  // Reactor.
  void OnWriteDone(bool ok) override { stream_->OnWriteDone(ok); }
  void OnCancel() override { stream_->OnCancel(); }
  void OnDone() override { delete this; }

 private:
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<ClientStream> stream_;
};

// A callback that finishes a unary call with `result`'s value or its error.
template <typename Response>
std::function<void(absl::StatusOr<Response>)> FinishWith(grpc::ServerUnaryReactor* reactor,
                                                         Response* response) {
  return [reactor, response](absl::StatusOr<Response> result) {
    if (!result.ok()) {
      reactor->Finish(ToGrpcStatus(result.status()));
      return;
    }
    *response = *std::move(result);
    reactor->Finish(grpc::Status::OK);
  };
}

}  // namespace

grpc::ServerWriteReactor<v1::GenerateResponse>* OrchestratorService::Generate(
    grpc::CallbackServerContext* context, const v1::GenerateRequest* request) {
  return new GenerateReactor(context, core_, loop_, *request);
}

grpc::ServerUnaryReactor* OrchestratorService::Abort(grpc::CallbackServerContext* context,
                                                     const v1::AbortRequest* request,
                                                     v1::AbortResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time deadline =
      context->deadline() == std::chrono::system_clock::time_point::max()
          ? absl::InfiniteFuture()
          : absl::FromChrono(context->deadline());
  loop_->Post([core = core_, request, response, reactor, deadline] {
    core->Abort(*request, deadline, FinishWith(reactor, response));
  });
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::GetPipelineStatus(
    grpc::CallbackServerContext* context, const v1::PipelineStatusRequest* request,
    v1::PipelineStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  loop_->Post([core = core_, response, reactor] {
    *response = core->Status();
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* OrchestratorService::CallStageUtility(
    grpc::CallbackServerContext* context, const v1::StageUtilityRequest* request,
    v1::StageUtilityResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  loop_->Post([core = core_, request, response, reactor] {
    core->CallStageUtility(*request, FinishWith(reactor, response));
  });
  return reactor;
}

}  // namespace omnistage
