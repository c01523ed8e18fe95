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
// stages have no replica) or refuse it with its own precise reason.
#ifndef OMNISTAGE_GATEWAY_CHAT_CALL_H_
#define OMNISTAGE_GATEWAY_CHAT_CALL_H_

#include <functional>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "gateway/api_error.h"
#include "gateway/chat_request.h"
#include "gateway/chat_response.h"
#include "gateway/http_server.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

// Runs a task on the HTTP server's loop.
using LoopPoster = std::function<void(std::function<void()>)>;

// Hears how each call ended: the HTTP status answered (200 for a stream that
// began) and whether the client went away first.
using CallObserver = std::function<void(int http_status)>;

class ChatCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  // Starts the call; it deletes itself once it ended. Loop thread.
  // `authorization`: the client's Authorization header, passed on.
  // The second try: its stub (null: none), and a counter of the calls that
  // took it (may be null).
  struct Fallback {
    v1::Orchestrator::Stub* stub = nullptr;
    Counter* taken = nullptr;
  };
  // `orchestrator_tls`: whether the stubs dial with TLS (for the fix an
  // unreachable orchestrator's message names: api_error.h).
  static void Start(v1::Orchestrator::Stub* stub, Fallback fallback, bool orchestrator_tls,
                    ChatRequest request, std::string model, std::string authorization,
                    std::string traceparent, std::shared_ptr<HttpExchange> exchange,
                    LoopPoster post, CallObserver observer);

  // Reactor (gRPC threads).
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  ChatCall(ChatRequest request, std::string model, std::string authorization,
           std::string traceparent, std::shared_ptr<HttpExchange> exchange, LoopPoster post,
           CallObserver observer);
  // Issues the Generate on `stub` (loop thread).
  void Begin(v1::Orchestrator::Stub* stub);
  // Loop thread.
  void Deliver(const v1::GenerateResponse& response);
  // Asks the orchestrator for the next response.
  void ReadNext();
  void ClientGone();
  void Finish(const grpc::Status& status);
  void Answer(int http_status, const std::string& body);
  // `error`'s status, headers and body.
  void AnswerError(const ApiError& error);

  // For the fallback's second try.
  const ChatRequest request_;
  const std::string model_;
  const std::string authorization_;
  const std::string traceparent_;
  Fallback fallback_;
  bool orchestrator_tls_ = false;
  bool got_response_ = false;

  grpc::ClientContext context_;
  v1::GenerateResponse response_;
  const bool stream_;
  ChatEncoder encoder_;
  const std::shared_ptr<HttpExchange> exchange_;
  const LoopPoster post_;
  const CallObserver observer_;
  v1::Terminal terminal_;
  bool got_terminal_ = false;
  // A read is outstanding, or its Deliver is posted (loop thread). While it is
  // not, the call is held open (AddHold) for the next one, which waits for the
  // client to take the last events.
  bool reading_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_CALL_H_
