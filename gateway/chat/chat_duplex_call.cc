#include "gateway/chat/chat_duplex_call.h"

#include <utility>

namespace omnistage {

ChatDuplexCall::ChatDuplexCall(ChatRequest request, std::string model, bool orchestrator_tls,
                               std::shared_ptr<HttpReply> exchange, LoopPoster post,
                               CallObserver observer)
    : ResponseReader(std::move(post), CallFallback()),
      answer_(request, std::move(model), orchestrator_tls, std::move(exchange),
              std::move(observer)),
      pieces_(std::move(request.input)) {
  *writing_.mutable_request() = std::move(request.generate);
}

void ChatDuplexCall::Start(v1::Orchestrator::Stub* stub, bool orchestrator_tls, ChatRequest request,
                           std::string model, std::string authorization, TraceHeaders trace,
                           std::shared_ptr<HttpReply> exchange, LoopPoster post,
                           CallObserver observer) {
  auto* call = new ChatDuplexCall(std::move(request), std::move(model), orchestrator_tls,
                                  std::move(exchange), std::move(post), std::move(observer));
  if (!authorization.empty()) call->context_.AddMetadata("authorization", authorization);
  trace.AddTo(call->context_);
  // The client going away stops the request on every stage.
  call->answer_.exchange().OnClose([call] { call->Cancel(); });
  stub->async()->GenerateDuplex(&call->context_, call);
  // The request first; each later write starts from OnWriteDone.
  call->StartWrite(&call->writing_);
  call->BeginReading();
  call->StartCall();
}

void ChatDuplexCall::OnWriteDone(bool ok) {
  // Not ok: the call ended (its status says why); nothing more is written.
  if (!ok) return;
  if (writing_.has_input() && writing_.input().last()) {
    StartWritesDone();
    return;
  }
  writing_.Clear();
  v1::InputChunk* chunk = writing_.mutable_input();
  if (next_piece_ < pieces_.size()) *chunk->add_payloads() = std::move(pieces_[next_piece_++]);
  if (next_piece_ >= pieces_.size()) chunk->set_last(true);
  StartWrite(&writing_);
}

void ChatDuplexCall::Deliver(const v1::GenerateResponse& response) {
  answer_.Deliver(response, *this);
}

void ChatDuplexCall::Ended(const grpc::Status& status) { answer_.Ended(status); }

}  // namespace omnistage
