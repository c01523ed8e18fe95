// ChatAnswer: what one chat completion answers its HTTP client, from the
// orchestrator's GenerateResponse stream as a call reads it (ChatCall's
// Generate, ChatDuplexCall's GenerateDuplex): server-sent events as the
// responses come (the next read only once the client's socket took the last
// events), or the whole completion at the end; errors in OpenAI's shape, as
// the call's own status before anything streamed and as an error event after.
// A stream whose audio.voice is none of OpenAI's names holds its first events
// until the first audio comes (its voice stage took the voice) or the call
// ends, so the voice stage's refusal of it is the call's own 400.
//
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_CHAT_CHAT_ANSWER_H_
#define OMNISTAGE_GATEWAY_CHAT_CHAT_ANSWER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/playback_model.h"
#include "gateway/chat/chat_request.h"
#include "gateway/chat/chat_response.h"
#include "gateway/chat/response_reader.h"
#include "gateway/http/api_error.h"
#include "gateway/http/http_reply.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// The seconds of audio `response` carries.
double AudioSecondsIn(const v1::GenerateResponse& response);

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
  // How a listener playing the audio as the gateway wrote it heard it (no
  // audio: the defaults).
  PlaybackFigures heard;
};
// Hears how each call ended.
using CallObserver = std::function<void(const CallOutcome& outcome)>;

// A terminal's finish reason as CallOutcome.outcome names it.
const char* OutcomeOf(const v1::Terminal& terminal);

// Why a call that ended without a terminal (`status`, OK when the stream just
// stopped) failed, as its client is told: an orchestrator not reached before
// any response (`got_response` false) with the fix its message points to.
absl::Status CallFailure(const grpc::Status& status, bool got_response, bool orchestrator_tls);

// Why a call whose answer streams to an HTTP client ended badly, if it did:
// the call failed or ended without a terminal (CallFailure; outcome "refused"
// when nothing came before, else "error"), or its terminal is an error or an
// abort (`terminal_error` says how, outcome OutcomeOf). nullopt: it finished
// well. The caller tells its client: the error as the answer's status before
// a stream began, else the stream broken.
struct EndFailure {
  ApiError error;
  const char* outcome;
};
std::optional<EndFailure> FailureOfEnd(
    const grpc::Status& status, bool got_response, const v1::Terminal* terminal,
    bool orchestrator_tls, const std::function<ApiError(const v1::Terminal&)>& terminal_error);

// Answers `error` on `exchange`: its status, headers and OpenAI-shaped body.
void RespondError(HttpReply& exchange, const ApiError& error);

class ChatAnswer {
 public:
  // `orchestrator_tls`: whether the stubs dial with TLS (for the fix an
  // unreachable orchestrator's message names: api_error.h).
  ChatAnswer(const ChatRequest& request, std::string model, bool orchestrator_tls,
             std::shared_ptr<HttpReply> exchange, CallObserver observer);

  // A response arrived; `call.ReadNext()` is asked once it is handed on.
  void Deliver(const v1::GenerateResponse& response, ReadControl& call);
  // The call ended: the last bytes, or the error, go out.
  void Ended(const grpc::Status& status);

  HttpReply& exchange() { return *exchange_; }
  const std::shared_ptr<HttpReply>& shared_exchange() const { return exchange_; }

 private:
  void Answer(const std::string& body);
  void AnswerError(const ApiError& error, const char* outcome);
  void Finish(int http_status, std::string outcome, std::string error = "");
  // The error a terminal that did not finish well answers with; a pipeline
  // that cannot hear the request's audio says so.
  ApiError TerminalError() const;

  const bool stream_;
  const bool heard_audio_;  // the request's prompt holds audio
  // Events are held until the first audio (voice_unvouched; cleared by it).
  bool hold_for_voice_;
  const bool orchestrator_tls_;
  ChatEncoder encoder_;
  const std::shared_ptr<HttpReply> exchange_;
  const CallObserver observer_;
  const absl::Time started_ = absl::Now();
  bool got_response_ = false;
  std::string request_id_;
  v1::Terminal terminal_;
  bool got_terminal_ = false;
  // The events of the response that carried the terminal, written with the
  // final ones when the call ends, and the seconds of audio they hold (for
  // an answer that does not stream: all of it).
  std::string held_events_;
  double held_audio_seconds_ = 0;
  // The audio as the client got it.
  PlaybackModel player_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_CHAT_ANSWER_H_
