// ChatCall: one chat completion of text in flight — the orchestrator's
// Generate stream (gRPC callback API) feeding one HTTP exchange through a
// ChatAnswer. (A prompt that holds audio is ChatDuplexCall's.)
//
// Flow control: the next response is read from the orchestrator only once the
// previous one's events were handed to the client's socket, so a slow HTTP
// client slows its own stream (and, past the orchestrator's
// max_client_queued_bytes, is cut off there) instead of growing the gateway's
// memory. A client that goes away cancels the call, which aborts the request
// on every stage.
//
// A call that fails with UNAVAILABLE before any response (no orchestrator
// ready, as the channel's health checks see it) is made once more through the
// fallback stub, whose channel does not look at readiness: an orchestrator
// that is not ready may still serve it (a text-only request while the audio
// stages have no replica) or refuse it with its own precise reason. The
// reading, the cancel and that second try are response_reader.h's.
#ifndef OMNISTAGE_GATEWAY_CHAT_CHAT_CALL_H_
#define OMNISTAGE_GATEWAY_CHAT_CHAT_CALL_H_

#include <memory>
#include <string>

#include "common/metrics.h"
#include "gateway/chat/chat_answer.h"
#include "gateway/chat/chat_request.h"
#include "gateway/chat/response_reader.h"
#include "gateway/http/api_error.h"
#include "gateway/http/http_reply.h"
#include "gateway/http/trace_headers.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class ChatCall final : public ResponseReader<grpc::ClientReadReactor<v1::GenerateResponse>> {
 public:
  // Starts the call; it deletes itself once it ended. Loop thread.
  // `authorization`: the client's Authorization header, passed on.
  using Fallback = CallFallback;
  // `orchestrator_tls`: whether the stubs dial with TLS (for the fix an
  // unreachable orchestrator's message names: api_error.h).
  static void Start(v1::Orchestrator::Stub* stub, Fallback fallback, bool orchestrator_tls,
                    ChatRequest request, std::string model, std::string authorization,
                    TraceHeaders trace, std::shared_ptr<HttpReply> exchange, LoopPoster post,
                    CallObserver observer);

 private:
  ChatCall(ChatRequest request, std::string model, bool orchestrator_tls, std::string authorization,
           TraceHeaders trace, std::shared_ptr<HttpReply> exchange, LoopPoster post,
           CallObserver observer, Fallback fallback);
  // Issues the Generate on `stub` (loop thread).
  void Begin(v1::Orchestrator::Stub* stub);
  // ResponseReader (loop thread).
  void Deliver(const v1::GenerateResponse& response) override;
  void Ended(const grpc::Status& status) override;
  void Retry(v1::Orchestrator::Stub* stub) override;

  // For the fallback's second try.
  const ChatRequest request_;
  const std::string model_;
  const std::string authorization_;
  const TraceHeaders trace_;
  const bool orchestrator_tls_;
  const CallObserver observer_;
  ChatAnswer answer_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_CHAT_CALL_H_
