// RealtimeDuplexCall: the orchestrator's GenerateDuplex behind one Realtime
// audio turn (realtime_audio_input.h): the request first, then the input
// chunks the session sends as the client appends audio, the last one marked
// `last` (and the call half-closed) at the commit, while the responses stream
// back as any Realtime call's (response_reader.h: one read at a time as the
// session asks, Cancel() aborts the request on every stage).
//
// Writes go out one at a time in the order sent; what waits is held here,
// bounded by what the client may append (the orchestrator's
// max_input_bytes ends the request past it). No fallback: input may already
// have gone to the first try.
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_DUPLEX_CALL_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_DUPLEX_CALL_H_

#include <deque>
#include <memory>
#include <string>

#include "gateway/chat/response_reader.h"
#include "gateway/http/trace_headers.h"
#include "gateway/realtime/realtime_call.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class RealtimeDuplexCall;

// The session's hold on the call (loop thread); nothing once it ended.
class RealtimeDuplexControl : public RealtimeCallControl {
 public:
  // More input; `chunk.last()` completes it.
  void Send(v1::InputChunk chunk);

 private:
  friend class RealtimeDuplexCall;
  RealtimeDuplexCall* duplex_ = nullptr;
};

class RealtimeDuplexCall final
    : public ResponseReader<grpc::ClientBidiReactor<v1::GenerateInput, v1::GenerateResponse>> {
 public:
  using Control = RealtimeDuplexControl;
  // Starts the call with `request` as its first message (loop thread); it
  // deletes itself once it ended.
  static std::shared_ptr<Control> Start(v1::Orchestrator::Stub* stub, v1::GenerateRequest request,
                                        std::string authorization, const TraceHeaders& trace,
                                        LoopPoster post, RealtimeCallHandler handler);

  // Reactor (gRPC threads).
  void OnWriteDone(bool ok) override;
  void OnWritesDoneDone(bool ok) override;

 private:
  friend class RealtimeDuplexControl;
  RealtimeDuplexCall(LoopPoster post, RealtimeCallHandler handler,
                     std::shared_ptr<Control> control);
  // Loop thread.
  void Send(v1::GenerateInput message);
  void WriteNext();
  // A write (or the half-close) finished.
  void Written(bool ok);
  // No more writes: the write hold goes.
  void CloseWrites();

  // ResponseReader (loop thread).
  void Deliver(const v1::GenerateResponse& response) override;
  void Ended(const grpc::Status& status) override;
  void Retry(v1::Orchestrator::Stub*) override {}
  // gRPC thread.
  void ReadsEnded() override;

  RealtimeCallHandler handler_;
  const std::shared_ptr<Control> control_;
  // Loop thread: the messages waiting, the one being written.
  std::deque<v1::GenerateInput> waiting_;
  v1::GenerateInput writing_message_;
  bool writing_ = false;
  // The last input was queued (the half-close follows it).
  bool input_done_ = false;
  // No write may start any more; once none runs, the write hold goes
  // (writes_closed_).
  bool closing_ = false;
  bool writes_closed_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_DUPLEX_CALL_H_
