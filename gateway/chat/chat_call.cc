#include "gateway/chat/chat_call.h"

#include <ctime>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"

namespace omnistage {
namespace {

constexpr char kEventStream[] = "text/event-stream";
constexpr char kJson[] = "application/json";

}  // namespace

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

ChatCall::ChatCall(ChatRequest request, std::string model, std::string authorization,
                   std::string traceparent, std::shared_ptr<HttpExchange> exchange, LoopPoster post,
                   CallObserver observer, Fallback fallback)
    : ResponseReader(std::move(post), fallback),
      request_(std::move(request)),
      model_(std::move(model)),
      authorization_(std::move(authorization)),
      traceparent_(std::move(traceparent)),
      stream_(request_.stream),
      encoder_(request_, model_, static_cast<int64_t>(std::time(nullptr))),
      exchange_(std::move(exchange)),
      observer_(std::move(observer)) {}

void ChatCall::Start(v1::Orchestrator::Stub* stub, Fallback fallback, bool orchestrator_tls,
                     ChatRequest request, std::string model, std::string authorization,
                     std::string traceparent, std::shared_ptr<HttpExchange> exchange,
                     LoopPoster post, CallObserver observer) {
  auto* call = new ChatCall(std::move(request), std::move(model), std::move(authorization),
                            std::move(traceparent), std::move(exchange), std::move(post),
                            std::move(observer), fallback);
  call->orchestrator_tls_ = orchestrator_tls;
  call->Begin(stub);
}

void ChatCall::Begin(v1::Orchestrator::Stub* stub) {
  if (!authorization_.empty()) context_.AddMetadata("authorization", authorization_);
  if (!traceparent_.empty()) context_.AddMetadata("traceparent", traceparent_);
  // The client going away stops the request on every stage.
  exchange_->OnClose([this] { Cancel(); });
  v1::GenerateRequest generate = request_.generate;
  stub->async()->Generate(&context_, &generate, this);
  BeginReading();
  StartCall();
}

void ChatCall::Deliver(const v1::GenerateResponse& response) {
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
    ReadNext();
    return;
  }
  if (!stream_) {
    encoder_.Gather(response);
    ReadNext();
    return;
  }
  const std::string events = encoder_.Events(response);
  if (response.has_terminal()) {
    // The last response: its events go with the final ones once the call
    // ends (next), the headers too for a one-response call: one write.
    held_events_ += events;
    ReadNext();
    return;
  }
  if (events.empty()) {
    ReadNext();
    return;
  }
  if (!exchange_->streaming()) exchange_->StartStream(200, kEventStream);
  exchange_->Send(events, [this] { ReadNext(); });
}

void ChatCall::AnswerError(const ApiError& error, const char* outcome) {
  for (const auto& [name, value] : error.Headers()) exchange_->AddHeader(name, value);
  exchange_->Respond(error.http_status, kJson, error.Json());
  Finish(error.http_status, outcome, error.message);
}

void ChatCall::Answer(const std::string& body) {
  exchange_->Respond(200, kJson, body);
  Finish(200, OutcomeOf(terminal_));
}

void ChatCall::Finish(int http_status, std::string outcome, std::string error) {
  observer_({http_status, request_id_, std::move(outcome), std::move(error)});
}

void ChatCall::Retry(v1::Orchestrator::Stub* stub) {
  // The second try takes the exchange (and its close hook) over; this call
  // ends without answering.
  auto* again = new ChatCall(request_, model_, authorization_, traceparent_, exchange_, post(),
                             observer_, Fallback());
  again->orchestrator_tls_ = orchestrator_tls_;
  again->Begin(stub);
}

void ChatCall::Ended(const grpc::Status& status) {
  if (exchange_->done()) {
    Finish(exchange_->streaming() ? 200 : 499, "client_closed");  // 499: before any response.
    return;
  }
  if (!held_events_.empty() && !exchange_->streaming()) {
    exchange_->StartStream(200, kEventStream);  // The held events are output: they stream.
  }
  if (!status.ok() || !got_terminal_) {
    absl::Status failed = status.ok() ? absl::InternalError("the stream ended without a terminal")
                                      : FromGrpcStatus(status);
    if (failed.code() == absl::StatusCode::kUnavailable && !got_response_) {
      failed = absl::UnavailableError(
          ExplainUnreachable(std::string(failed.message()), orchestrator_tls_));
    }
    const ApiError error = FromStatus(failed);
    if (!exchange_->streaming()) {
      AnswerError(error, got_response_ ? "error" : "refused");
      return;
    }
    // Events went out already: say that this one broke the stream.
    ApiError broke = error;
    broke.message = absl::StrCat("the stream broke before its end: ", error.message);
    exchange_->Send(absl::StrCat(held_events_, "data: ", broke.Json(), "\n\ndata: [DONE]\n\n"));
    exchange_->EndStream();
    Finish(200, "error", broke.message);
    return;
  }
  if (!stream_) {
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
      const ApiError error = encoder_.TerminalError(terminal_);
      AnswerError(error, "error");
      return;
    }
    exchange_->StartStream(200, kEventStream);
  }
  exchange_->Send(held_events_ + encoder_.FinalEvents(terminal_));
  exchange_->EndStream();
  Finish(200, OutcomeOf(terminal_),
         terminal_.finish_reason() == v1::FINISH_REASON_ERROR ? terminal_.error().message() : "");
}

}  // namespace omnistage
