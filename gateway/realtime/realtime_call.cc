#include "gateway/realtime/realtime_call.h"

#include <utility>

namespace omnistage {

RealtimeCall::RealtimeCall(v1::GenerateRequest request, std::string authorization,
                           TraceHeaders trace, LoopPoster post, CallFallback fallback,
                           Handler handler, std::shared_ptr<Control> control)
    : ResponseReader(std::move(post), fallback),
      request_(std::move(request)),
      authorization_(std::move(authorization)),
      trace_(std::move(trace)),
      handler_(std::move(handler)),
      control_(std::move(control)) {
  control_->call_ = this;
}

std::shared_ptr<RealtimeCall::Control> RealtimeCall::Start(
    v1::Orchestrator::Stub* stub, CallFallback fallback, v1::GenerateRequest request,
    std::string authorization, TraceHeaders trace, LoopPoster post, Handler handler) {
  auto control = std::make_shared<Control>();
  auto* call = new RealtimeCall(std::move(request), std::move(authorization), std::move(trace),
                                std::move(post), fallback, std::move(handler), control);
  call->Begin(stub);
  return control;
}

void RealtimeCall::Begin(v1::Orchestrator::Stub* stub) {
  if (!authorization_.empty()) context_.AddMetadata("authorization", authorization_);
  trace_.AddTo(context_);
  stub->async()->Generate(&context_, &request_, this);
  BeginReading();
  StartCall();
}

void RealtimeCall::Deliver(const v1::GenerateResponse& response) {
  handler_.on_response(response);
}

void RealtimeCall::Retry(v1::Orchestrator::Stub* stub) {
  auto* again = new RealtimeCall(request_, authorization_, trace_, post(), CallFallback(),
                                 std::move(handler_), control_);
  again->Begin(stub);
}

void RealtimeCall::Ended(const grpc::Status& status) {
  control_->call_ = nullptr;
  handler_.on_done(status);
}

}  // namespace omnistage
