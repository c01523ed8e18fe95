#include "gateway/chat/chat_answer.h"

#include <ctime>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/modality.h"

namespace omnistage {
namespace {

constexpr char kEventStream[] = "text/event-stream";
constexpr char kJson[] = "application/json";

bool HasAudio(const ChatRequest& request) {
  for (const v1::Payload& piece : request.input) {
    if (piece.has_audio()) return true;
  }
  return false;
}

}  // namespace

double AudioSecondsIn(const v1::GenerateResponse& response) {
  double seconds = 0;
  for (const v1::OutputChunk& chunk : response.outputs()) {
    if (chunk.payload().has_audio()) seconds += AudioSecondsOf(chunk.payload().audio());
  }
  return seconds;
}

const char* OutcomeOf(const v1::Terminal& terminal) {
  switch (terminal.finish_reason()) {
    case v1::FINISH_REASON_STOP:
      return "stop";
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_ABORT:
      return "abort";
    default:
      return "error";
  }
}

absl::Status CallFailure(const grpc::Status& status, bool got_response, bool orchestrator_tls) {
  absl::Status failed = status.ok() ? absl::InternalError("the stream ended without a terminal")
                                    : FromGrpcStatus(status);
  if (failed.code() == absl::StatusCode::kUnavailable && !got_response) {
    failed =
        absl::UnavailableError(ExplainUnreachable(std::string(failed.message()), orchestrator_tls));
  }
  return failed;
}

std::optional<EndFailure> FailureOfEnd(
    const grpc::Status& status, bool got_response, const v1::Terminal* terminal,
    bool orchestrator_tls, const std::function<ApiError(const v1::Terminal&)>& terminal_error) {
  if (!status.ok() || terminal == nullptr) {
    return EndFailure{FromStatus(CallFailure(status, got_response, orchestrator_tls)),
                      got_response ? "error" : "refused"};
  }
  if (terminal->finish_reason() == v1::FINISH_REASON_ERROR ||
      terminal->finish_reason() == v1::FINISH_REASON_ABORT) {
    return EndFailure{terminal_error(*terminal), OutcomeOf(*terminal)};
  }
  return std::nullopt;
}

void RespondError(HttpReply& exchange, const ApiError& error) {
  for (const auto& [name, value] : error.Headers()) exchange.AddHeader(name, value);
  exchange.Respond(error.http_status, kJson, error.Json());
}

ChatAnswer::ChatAnswer(const ChatRequest& request, std::string model, bool orchestrator_tls,
                       std::shared_ptr<HttpReply> exchange, CallObserver observer)
    : stream_(request.stream),
      heard_audio_(HasAudio(request)),
      hold_for_voice_(request.stream && request.voice_unvouched),
      orchestrator_tls_(orchestrator_tls),
      encoder_(request, std::move(model), static_cast<int64_t>(std::time(nullptr))),
      exchange_(std::move(exchange)),
      observer_(std::move(observer)) {}

void ChatAnswer::Deliver(const v1::GenerateResponse& response, ReadControl& call) {
  got_response_ = true;
  if (!response.request_id().empty()) {
    request_id_ = response.request_id();
    encoder_.set_request_id(request_id_);
  }
  if (response.has_terminal()) {
    terminal_ = response.terminal();
    got_terminal_ = true;
  }
  if (exchange_->done()) {  // The client went away: drain until the cancel lands.
    call.ReadNext();
    return;
  }
  const double audio_seconds = AudioSecondsIn(response);
  if (!stream_) {
    encoder_.Gather(response);
    held_audio_seconds_ += audio_seconds;
    call.ReadNext();
    return;
  }
  const std::string events = encoder_.Events(response);
  if (response.has_terminal()) {
    // The last response: its events go with the final ones once the call
    // ends (next), the headers too for a one-response call: one write.
    held_events_ += events;
    held_audio_seconds_ += audio_seconds;
    call.ReadNext();
    return;
  }
  if (events.empty()) {
    call.ReadNext();
    return;
  }
  if (hold_for_voice_ && audio_seconds == 0) {
    held_events_ += events;  // Until the voice stage shows it took the voice.
    call.ReadNext();
    return;
  }
  hold_for_voice_ = false;
  if (!exchange_->streaming()) exchange_->StartStream(200, kEventStream);
  player_.Arrived(audio_seconds, absl::Now());
  exchange_->Send(held_events_ + events, [&call] { call.ReadNext(); });
  held_events_.clear();
}

ApiError ChatAnswer::TerminalError() const {
  ApiError error = encoder_.TerminalError(terminal_);
  const v1::Error& cause = terminal_.error();
  if (heard_audio_ && cause.stage_id() == 0 &&
      cause.code() == static_cast<int>(absl::StatusCode::kInvalidArgument) &&
      absl::StrContains(cause.message(), "is audio, but this engine accepts")) {
    error.message = absl::StrCat(
        "This pipeline does not hear audio: its first stage takes no input_audio (", error.message,
        "). Send audio to a pipeline whose first stage is a speech recogniser, such as "
        "pipelines/local_voice_agent.yaml.");
    error.param = "messages";
  }
  return error;
}

void ChatAnswer::AnswerError(const ApiError& error, const char* outcome) {
  RespondError(*exchange_, error);
  Finish(error.http_status, outcome, error.message);
}

void ChatAnswer::Answer(const std::string& body) {
  player_.Arrived(held_audio_seconds_, absl::Now());
  exchange_->Respond(200, kJson, body);
  Finish(200, OutcomeOf(terminal_));
}

void ChatAnswer::Finish(int http_status, std::string outcome, std::string error) {
  observer_(
      {http_status, request_id_, std::move(outcome), std::move(error), player_.Figures(started_)});
}

void ChatAnswer::Ended(const grpc::Status& status) {
  if (exchange_->done()) {
    Finish(exchange_->streaming() ? 200 : 499, "client_closed");  // 499: before any response.
    return;
  }
  const bool failed =
      !status.ok() || !got_terminal_ || terminal_.finish_reason() == v1::FINISH_REASON_ERROR;
  // Held for the voice, and it failed: its status says why, as if nothing came.
  if (hold_for_voice_ && failed) held_events_.clear();
  if (!held_events_.empty() && !exchange_->streaming()) {
    exchange_->StartStream(200, kEventStream);  // The held events are output: they stream.
  }
  if (!status.ok() || !got_terminal_) {
    const ApiError error = FromStatus(CallFailure(status, got_response_, orchestrator_tls_));
    if (!exchange_->streaming()) {
      AnswerError(error, got_response_ ? "error" : "refused");
      return;
    }
    // Events went out already: say that this one broke the stream.
    ApiError broke = error;
    broke.message = absl::StrCat("the stream broke before its end: ", error.message);
    player_.Arrived(held_audio_seconds_, absl::Now());
    exchange_->Send(absl::StrCat(held_events_, "data: ", broke.Json(), "\n\ndata: [DONE]\n\n"));
    exchange_->EndStream();
    Finish(200, "error", broke.message);
    return;
  }
  if (!stream_) {
    if (terminal_.finish_reason() == v1::FINISH_REASON_ERROR) {
      AnswerError(TerminalError(), "error");
      return;
    }
    std::variant<std::string, ApiError> body = encoder_.Completion(terminal_);
    if (std::holds_alternative<ApiError>(body)) {
      AnswerError(std::get<ApiError>(body), OutcomeOf(terminal_));
    } else {
      Answer(std::get<std::string>(body));
    }
    return;
  }
  if (!exchange_->streaming()) {
    // Nothing streamed yet: a failure is still the call's own status.
    if (terminal_.finish_reason() == v1::FINISH_REASON_ERROR) {
      AnswerError(TerminalError(), "error");
      return;
    }
    exchange_->StartStream(200, kEventStream);
  }
  player_.Arrived(held_audio_seconds_, absl::Now());
  exchange_->Send(held_events_ + encoder_.FinalEvents(terminal_));
  exchange_->EndStream();
  Finish(200, OutcomeOf(terminal_),
         terminal_.finish_reason() == v1::FINISH_REASON_ERROR ? terminal_.error().message() : "");
}

}  // namespace omnistage
