// RealtimeCall: the orchestrator's Generate stream behind one Realtime
// response (gRPC callback API), handing each GenerateResponse to the session
// on the HTTP server's loop and reading the next only when the session asks
// (once the client's socket took the last events: a slow client slows its
// own response). Cancel() cancels the call, which aborts the request on every
// stage. As for chat completions, a call refused UNAVAILABLE before any
// response is made once more through the fallback stub (response_reader.h).
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_CALL_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_CALL_H_

#include <functional>
#include <memory>
#include <string>

#include "gateway/chat/response_reader.h"
#include "gateway/http/trace_headers.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

// What a Realtime call tells its session (loop thread).
struct RealtimeCallHandler {
  // A response arrived; the control's ReadNext() asks for the next.
  std::function<void(const v1::GenerateResponse&)> on_response;
  // The call ended; the call is gone once this returns.
  std::function<void(const grpc::Status&)> on_done;
};

// What the session holds: it reaches the call running now (the fallback's
// second try takes the first one's place) while one runs; nothing after.
// Loop thread.
class RealtimeCallControl : public ReadControl {
 public:
  void ReadNext() override {
    if (call_ != nullptr) call_->ReadNext();
  }
  void Cancel() override {
    if (call_ != nullptr) call_->Cancel();
  }

 protected:
  friend class RealtimeCall;
  friend class RealtimeDuplexCall;
  ReadControl* call_ = nullptr;
};

class RealtimeCall final
    : public ResponseReader<grpc::ClientReadReactor<v1::GenerateResponse>> {
 public:
  using Handler = RealtimeCallHandler;
  using Control = RealtimeCallControl;
  // Starts the call (loop thread); it deletes itself once it ended.
  static std::shared_ptr<Control> Start(v1::Orchestrator::Stub* stub, CallFallback fallback,
                                        v1::GenerateRequest request, std::string authorization,
                                        TraceHeaders trace, LoopPoster post, Handler handler);

 private:
  RealtimeCall(v1::GenerateRequest request, std::string authorization, TraceHeaders trace,
               LoopPoster post, CallFallback fallback, Handler handler,
               std::shared_ptr<Control> control);
  void Begin(v1::Orchestrator::Stub* stub);
  // ResponseReader (loop thread).
  void Deliver(const v1::GenerateResponse& response) override;
  void Ended(const grpc::Status& status) override;
  void Retry(v1::Orchestrator::Stub* stub) override;

  const v1::GenerateRequest request_;
  const std::string authorization_;
  const TraceHeaders trace_;
  Handler handler_;
  const std::shared_ptr<Control> control_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_CALL_H_
