#include "gateway/realtime/realtime_duplex_call.h"

#include <utility>

namespace omnistage {

void RealtimeDuplexControl::Send(v1::InputChunk chunk) {
  if (duplex_ == nullptr) return;
  v1::GenerateInput message;
  *message.mutable_input() = std::move(chunk);
  duplex_->Send(std::move(message));
}

RealtimeDuplexCall::RealtimeDuplexCall(LoopPoster post, RealtimeCallHandler handler,
                                       std::shared_ptr<Control> control)
    : ResponseReader(std::move(post), CallFallback()),
      handler_(std::move(handler)),
      control_(std::move(control)) {
  control_->call_ = this;
  control_->duplex_ = this;
}

std::shared_ptr<RealtimeDuplexCall::Control> RealtimeDuplexCall::Start(
    v1::Orchestrator::Stub* stub, v1::GenerateRequest request, std::string authorization,
    const TraceHeaders& trace, LoopPoster post, RealtimeCallHandler handler) {
  auto control = std::make_shared<Control>();
  auto* call = new RealtimeDuplexCall(std::move(post), std::move(handler), control);
  if (!authorization.empty()) call->context_.AddMetadata("authorization", authorization);
  trace.AddTo(call->context_);
  stub->async()->GenerateDuplex(&call->context_, call);
  // Writes, like reads, are started from the loop: a second hold, until the
  // half-close went out or no write may follow.
  call->AddHold();
  v1::GenerateInput first;
  *first.mutable_request() = std::move(request);
  call->Send(std::move(first));
  call->BeginReading();
  call->StartCall();
  return control;
}

void RealtimeDuplexCall::Send(v1::GenerateInput message) {
  if (closing_ || input_done_) return;
  if (message.has_input() && message.input().last()) input_done_ = true;
  waiting_.push_back(std::move(message));
  if (!writing_) WriteNext();
}

void RealtimeDuplexCall::WriteNext() {
  writing_ = true;
  if (waiting_.empty()) {  // Only after the last input: the half-close.
    StartWritesDone();
    return;
  }
  writing_message_ = std::move(waiting_.front());
  waiting_.pop_front();
  StartWrite(&writing_message_);
}

void RealtimeDuplexCall::OnWriteDone(bool ok) {
  post()([this, ok] { Written(ok); });
}

void RealtimeDuplexCall::OnWritesDoneDone(bool) {
  post()([this] {
    writing_ = false;
    CloseWrites();
  });
}

void RealtimeDuplexCall::Written(bool ok) {
  writing_ = false;
  writing_message_.Clear();
  // Not ok: the call ended; its status says why.
  if (!ok || closing_) {
    CloseWrites();
  } else if (!waiting_.empty() || input_done_) {
    WriteNext();
  }
}

void RealtimeDuplexCall::CloseWrites() {
  closing_ = true;
  waiting_.clear();
  // One being written finishes first (Written closes then).
  if (writes_closed_ || writing_) return;
  writes_closed_ = true;
  RemoveHold();
}

void RealtimeDuplexCall::ReadsEnded() {
  // The call is over: what was not written never will be.
  post()([this] { CloseWrites(); });
}

void RealtimeDuplexCall::Deliver(const v1::GenerateResponse& response) {
  handler_.on_response(response);
}

void RealtimeDuplexCall::Ended(const grpc::Status& status) {
  control_->call_ = nullptr;
  control_->duplex_ = nullptr;
  handler_.on_done(status);
}

}  // namespace omnistage
