#include "gateway/chat/chat_call.h"

#include <utility>

namespace omnistage {

ChatCall::ChatCall(ChatRequest request, std::string model, bool orchestrator_tls,
                   std::string authorization, TraceHeaders trace,
                   std::shared_ptr<HttpReply> exchange, LoopPoster post, CallObserver observer,
                   Fallback fallback)
    : ResponseReader(std::move(post), fallback),
      request_(std::move(request)),
      model_(std::move(model)),
      authorization_(std::move(authorization)),
      trace_(std::move(trace)),
      orchestrator_tls_(orchestrator_tls),
      observer_(observer),
      answer_(request_, model_, orchestrator_tls_, std::move(exchange), std::move(observer)) {}

void ChatCall::Start(v1::Orchestrator::Stub* stub, Fallback fallback, bool orchestrator_tls,
                     ChatRequest request, std::string model, std::string authorization,
                     TraceHeaders trace, std::shared_ptr<HttpReply> exchange, LoopPoster post,
                     CallObserver observer) {
  auto* call = new ChatCall(std::move(request), std::move(model), orchestrator_tls,
                            std::move(authorization), std::move(trace), std::move(exchange),
                            std::move(post), std::move(observer), fallback);
  call->Begin(stub);
}

void ChatCall::Begin(v1::Orchestrator::Stub* stub) {
  if (!authorization_.empty()) context_.AddMetadata("authorization", authorization_);
  trace_.AddTo(context_);
  // The client going away stops the request on every stage.
  answer_.exchange().OnClose([this] { Cancel(); });
  v1::GenerateRequest generate = request_.generate;
  stub->async()->Generate(&context_, &generate, this);
  BeginReading();
  StartCall();
}

void ChatCall::Deliver(const v1::GenerateResponse& response) { answer_.Deliver(response, *this); }

void ChatCall::Ended(const grpc::Status& status) { answer_.Ended(status); }

void ChatCall::Retry(v1::Orchestrator::Stub* stub) {
  // The second try takes the exchange (and its close hook) over; this call
  // ends without answering.
  auto* again = new ChatCall(request_, model_, orchestrator_tls_, authorization_, trace_,
                             answer_.shared_exchange(), post(), observer_, Fallback());
  again->Begin(stub);
}

}  // namespace omnistage
