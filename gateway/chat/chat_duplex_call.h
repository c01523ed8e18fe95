// ChatDuplexCall: one chat completion whose prompt holds audio (input_audio
// parts) in flight — the orchestrator's GenerateDuplex: the request, then the
// prompt's pieces (text and audio, in order, one per input message, the last
// marked `last`), while the responses come back to a ChatAnswer as a
// Generate's do. Stage 0 must hear: a pipeline whose first stage takes no
// audio refuses it, and the client's 400 says so.
//
// Writes start from the one before's completion, so one runs at a time. No
// fallback: input may already have gone to the first try.
#ifndef OMNISTAGE_GATEWAY_CHAT_CHAT_DUPLEX_CALL_H_
#define OMNISTAGE_GATEWAY_CHAT_CHAT_DUPLEX_CALL_H_

#include <memory>
#include <string>
#include <vector>

#include "gateway/chat/chat_answer.h"
#include "gateway/chat/chat_request.h"
#include "gateway/chat/response_reader.h"
#include "gateway/http/http_reply.h"
#include "gateway/http/trace_headers.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class ChatDuplexCall final
    : public ResponseReader<grpc::ClientBidiReactor<v1::GenerateInput, v1::GenerateResponse>> {
 public:
  // Starts the call; it deletes itself once it ended. Loop thread.
  static void Start(v1::Orchestrator::Stub* stub, bool orchestrator_tls, ChatRequest request,
                    std::string model, std::string authorization, TraceHeaders trace,
                    std::shared_ptr<HttpReply> exchange, LoopPoster post, CallObserver observer);

  // Reactor (gRPC threads).
  void OnWriteDone(bool ok) override;

 private:
  ChatDuplexCall(ChatRequest request, std::string model, bool orchestrator_tls,
                 std::shared_ptr<HttpReply> exchange, LoopPoster post, CallObserver observer);
  // ResponseReader (loop thread).
  void Deliver(const v1::GenerateResponse& response) override;
  void Ended(const grpc::Status& status) override;
  void Retry(v1::Orchestrator::Stub*) override {}

  ChatAnswer answer_;
  // gRPC threads, one write at a time: what is left to send, the message
  // being written, and whether it was the last.
  std::vector<v1::Payload> pieces_;
  size_t next_piece_ = 0;
  v1::GenerateInput writing_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_CHAT_DUPLEX_CALL_H_
