// ChatCall: one chat completion in flight — the orchestrator's Generate stream
// (gRPC callback API) feeding one HTTP exchange through a ChatEncoder.
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

#include <functional>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "gateway/chat/chat_request.h"
#include "gateway/chat/chat_response.h"
#include "gateway/chat/response_reader.h"
#include "gateway/http/api_error.h"
#include "gateway/http/http_server.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

// How a call ended.
struct CallOutcome {
  // The HTTP status answered (200 for a stream that began; 499 when the
  // client went away before any response).
  int http_status = 0;
  // The orchestrator's request id; "" when none came.
  std::string request_id;
  // "stop", "length", "abort" or "error" (the pipeline's finish reason; "error"
  // also for a stream that broke), "refused" (an error answered before the
  // pipeline produced anything), "client_closed" (the client went away first).
  std::string outcome;
  // With "error" and "refused": the message the client was told.
  std::string error;
};
// Hears how each call ended.
using CallObserver = std::function<void(const CallOutcome& outcome)>;

// A terminal's finish reason as CallOutcome.outcome names it.
const char* OutcomeOf(const v1::Terminal& terminal);

class ChatCall final : public ResponseReader<grpc::ClientReadReactor<v1::GenerateResponse>> {
 public:
  // Starts the call; it deletes itself once it ended. Loop thread.
  // `authorization`: the client's Authorization header, passed on.
  using Fallback = CallFallback;
  // `orchestrator_tls`: whether the stubs dial with TLS (for the fix an
  // unreachable orchestrator's message names: api_error.h).
  static void Start(v1::Orchestrator::Stub* stub, Fallback fallback, bool orchestrator_tls,
                    ChatRequest request, std::string model, std::string authorization,
                    std::string traceparent, std::shared_ptr<HttpExchange> exchange,
                    LoopPoster post, CallObserver observer);


 private:
  ChatCall(ChatRequest request, std::string model, std::string authorization,
           std::string traceparent, std::shared_ptr<HttpExchange> exchange, LoopPoster post,
           CallObserver observer, Fallback fallback);
  // Issues the Generate on `stub` (loop thread).
  void Begin(v1::Orchestrator::Stub* stub);
  // ResponseReader (loop thread).
  void Deliver(const v1::GenerateResponse& response) override;
  void Ended(const grpc::Status& status) override;
  void Retry(v1::Orchestrator::Stub* stub) override;
  // Answers 200 with `body`; the call ended with the terminal's finish reason.
  void Answer(const std::string& body);
  // `error`'s status, headers and body; the call ended as `outcome`.
  void AnswerError(const ApiError& error, const char* outcome);
  // Tells the observer how the call ended.
  void Finish(int http_status, std::string outcome, std::string error = "");

  // For the fallback's second try.
  const ChatRequest request_;
  const std::string model_;
  const std::string authorization_;
  const std::string traceparent_;
  bool orchestrator_tls_ = false;
  bool got_response_ = false;
  std::string request_id_;

  const bool stream_;
  ChatEncoder encoder_;
  const std::shared_ptr<HttpExchange> exchange_;
  const CallObserver observer_;
  v1::Terminal terminal_;
  bool got_terminal_ = false;
  // The events of the response that carried the terminal, written with the
  // final ones when the call ends.
  std::string held_events_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_CHAT_CALL_H_
