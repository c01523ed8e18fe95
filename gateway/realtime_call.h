// RealtimeCall: the orchestrator's Generate stream behind one Realtime
// response (gRPC callback API), handing each GenerateResponse to the session
// on the HTTP server's loop and reading the next only when the session asks
// (once the client's socket took the last events: a slow client slows its
// own response). Cancel() cancels the call, which aborts the request on every
// stage. As for chat completions (chat_call.h), a call refused UNAVAILABLE
// before any response is made once more through the fallback stub, whose
// channel does not look at readiness.
#ifndef OMNISTAGE_GATEWAY_REALTIME_CALL_H_
#define OMNISTAGE_GATEWAY_REALTIME_CALL_H_

#include <functional>
#include <memory>
#include <string>

#include "gateway/chat_call.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class RealtimeCall final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  struct Handler {
    // A response arrived (loop thread); ReadNext() asks for the next.
    std::function<void(const v1::GenerateResponse&)> on_response;
    // The call ended (loop thread); the call is gone once this returns.
    std::function<void(const grpc::Status&)> on_done;
  };
  // What the session holds: it reaches the call running now (the fallback's
  // second try takes the first one's place) while one runs. Loop thread.
  class Control {
   public:
    // Asks for the next response.
    void ReadNext();
    // Cancels the call: the request is aborted on every stage; on_done
    // follows.
    void Cancel();

   private:
    friend class RealtimeCall;
    RealtimeCall* call_ = nullptr;
  };
  // Starts the call (loop thread); it deletes itself once it ended.
  static std::shared_ptr<Control> Start(v1::Orchestrator::Stub* stub, ChatCall::Fallback fallback,
                                        v1::GenerateRequest request, std::string authorization,
                                        LoopPoster post, Handler handler);

  // Reactor (gRPC threads).
  void OnReadDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  RealtimeCall(v1::GenerateRequest request, std::string authorization, LoopPoster post,
               Handler handler, std::shared_ptr<Control> control);
  void Begin(v1::Orchestrator::Stub* stub);
  void Read();
  // Loop thread: the call ended; tries the fallback or tells the handler.
  void Finish(const grpc::Status& status);

  const v1::GenerateRequest request_;
  const std::string authorization_;
  const LoopPoster post_;
  Handler handler_;
  ChatCall::Fallback fallback_;
  grpc::ClientContext context_;
  v1::GenerateResponse response_;
  bool got_response_ = false;
  bool cancelled_ = false;
  // A read is outstanding, or its response is posted to the loop.
  bool reading_ = false;
  const std::shared_ptr<Control> control_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_CALL_H_
