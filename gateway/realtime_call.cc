#include "gateway/realtime_call.h"

#include <utility>

namespace omnistage {

void RealtimeCall::Control::ReadNext() {
  if (call_ != nullptr && !call_->reading_) call_->Read();
}

void RealtimeCall::Control::Cancel() {
  if (call_ == nullptr) return;
  call_->cancelled_ = true;
  call_->context_.TryCancel();
  // Read on to the stream's end (none may be asked for while the session
  // waits for its client).
  if (!call_->reading_) call_->Read();
}

void RealtimeCall::Read() {
  reading_ = true;
  StartRead(&response_);
}

RealtimeCall::RealtimeCall(v1::GenerateRequest request, std::string authorization,
                           LoopPoster post, Handler handler, std::shared_ptr<Control> control)
    : request_(std::move(request)),
      authorization_(std::move(authorization)),
      post_(std::move(post)),
      handler_(std::move(handler)),
      control_(std::move(control)) {
  control_->call_ = this;
}

std::shared_ptr<RealtimeCall::Control> RealtimeCall::Start(
    v1::Orchestrator::Stub* stub, ChatCall::Fallback fallback, v1::GenerateRequest request,
    std::string authorization, LoopPoster post, Handler handler) {
  auto control = std::make_shared<Control>();
  auto* call = new RealtimeCall(std::move(request), std::move(authorization), std::move(post),
                                std::move(handler), control);
  call->fallback_ = fallback;
  call->Begin(stub);
  return control;
}

void RealtimeCall::Begin(v1::Orchestrator::Stub* stub) {
  if (!authorization_.empty()) context_.AddMetadata("authorization", authorization_);
  stub->async()->Generate(&context_, &request_, this);
  // Held while a read may still be asked for (from the loop, outside the
  // reactions), until the stream's end was read.
  AddHold();
  Read();
  StartCall();
}

void RealtimeCall::OnReadDone(bool ok) {
  if (!ok) {
    RemoveHold();
    return;
  }
  auto response = std::make_shared<v1::GenerateResponse>(std::move(response_));
  response_.Clear();
  post_([this, response] {
    reading_ = false;
    got_response_ = true;
    if (cancelled_) {  // Drained until the cancel lands.
      Read();
      return;
    }
    handler_.on_response(*response);
  });
}

void RealtimeCall::OnDone(const grpc::Status& status) {
  post_([this, status] {
    Finish(status);
    delete this;
  });
}

void RealtimeCall::Finish(const grpc::Status& status) {
  control_->call_ = nullptr;
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE && !got_response_ && !cancelled_ &&
      fallback_.stub != nullptr) {
    if (fallback_.taken != nullptr) fallback_.taken->Increment();
    auto* again = new RealtimeCall(request_, authorization_, post_, std::move(handler_), control_);
    again->Begin(fallback_.stub);
    return;
  }
  handler_.on_done(status);
}

}  // namespace omnistage
