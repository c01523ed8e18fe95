// ResponseReader: what every gateway call to the orchestrator does with the
// GenerateResponse stream it reads (gRPC callback API), shared by the chat
// completions' Generate (chat_call.h) and the Realtime API's Generate and
// GenerateDuplex (realtime_call.h, realtime_duplex_call.h):
//
// - Reads one response at a time and hands it to the HTTP server's loop; the
//   next is read only when the loop asks (Read()), once the client's socket
//   took the last events: a slow client slows its own stream instead of
//   growing the gateway's memory. Reads are started from the loop, outside
//   the reactions, so the call is held (AddHold) until the stream's end was
//   read.
// - Cancel() cancels the call (the request is aborted on every stage) and
//   reads on, dropping what comes, until the cancel lands.
// - A call that fails UNAVAILABLE before any response (no orchestrator ready,
//   as the channel's health checks see it) is made once more through the
//   fallback stub, whose channel does not look at readiness: an orchestrator
//   that is not ready may still serve it or refuse it with its own reason.
//
// `Base` is grpc::ClientReadReactor<v1::GenerateResponse> or
// grpc::ClientBidiReactor<v1::GenerateInput, v1::GenerateResponse>. The
// derived call starts the RPC on context_, calls BeginReading() and then
// StartCall(); it deletes itself once it ended (after Ended or Retry).
#ifndef OMNISTAGE_GATEWAY_CHAT_RESPONSE_READER_H_
#define OMNISTAGE_GATEWAY_CHAT_RESPONSE_READER_H_

#include <functional>
#include <memory>
#include <utility>

#include "common/metrics.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

// Runs a task on the HTTP server's loop.
using LoopPoster = std::function<void(std::function<void()>)>;

// The second try of a call refused UNAVAILABLE before any response: its stub
// (null: none), and a counter of the calls that took it (may be null).
struct CallFallback {
  v1::Orchestrator::Stub* stub = nullptr;
  Counter* taken = nullptr;
};

// What the loop may do to a running call.
class ReadControl {
 public:
  virtual ~ReadControl() = default;
  // Asks for the next response (when none is being read).
  virtual void ReadNext() = 0;
  // Cancels the call: the request is aborted on every stage; its end follows.
  virtual void Cancel() = 0;
};

template <typename Base>
class ResponseReader : public Base, public ReadControl {
 public:
  // Reactor (gRPC threads).
  void OnReadDone(bool ok) override {
    if (!ok) {  // The stream ended: no more reads; OnDone follows.
      ReadsEnded();
      this->RemoveHold();
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
      Deliver(*response);
    });
  }
  void OnDone(const grpc::Status& status) override {
    post_([this, status] {
      if (status.error_code() == grpc::StatusCode::UNAVAILABLE && !got_response_ &&
          !cancelled_ && fallback_.stub != nullptr) {
        if (fallback_.taken != nullptr) fallback_.taken->Increment();
        Retry(fallback_.stub);
      } else {
        Ended(status);
      }
      delete this;
    });
  }

  // ReadControl (loop thread).
  void ReadNext() override {
    if (!reading_) Read();
  }
  void Cancel() override {
    cancelled_ = true;
    context_.TryCancel();
    // Read on to the stream's end (none may be asked for while the loop waits
    // for its client).
    if (!reading_) Read();
  }

 protected:
  ResponseReader(LoopPoster post, CallFallback fallback)
      : post_(std::move(post)), fallback_(fallback) {}

  // Loop thread: a response arrived; ReadNext() asks for the next.
  virtual void Deliver(const v1::GenerateResponse& response) = 0;
  // Loop thread: the call ended (it is deleted once this returns).
  virtual void Ended(const grpc::Status& status) = 0;
  // Loop thread: makes the call once more on `stub` with what this one was
  // given (a new call, whose fallback is none); this one ends unseen.
  virtual void Retry(v1::Orchestrator::Stub* stub) = 0;
  // gRPC thread: the stream's end was read (before OnDone).
  virtual void ReadsEnded() {}

  // Holds the call for the reads the loop starts, and starts the first.
  // Before StartCall().
  void BeginReading() {
    this->AddHold();
    Read();
  }
  bool cancelled() const { return cancelled_; }
  const LoopPoster& post() const { return post_; }

  grpc::ClientContext context_;

 private:
  void Read() {
    reading_ = true;
    this->StartRead(&response_);
  }

  const LoopPoster post_;
  const CallFallback fallback_;
  v1::GenerateResponse response_;
  bool got_response_ = false;
  bool cancelled_ = false;
  // A read is outstanding, or its response is posted to the loop.
  bool reading_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_RESPONSE_READER_H_
