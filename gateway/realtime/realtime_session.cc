#include "gateway/realtime/realtime_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/error_proto.h"
#include "common/grpc/grpc_util.h"
#include "common/log.h"
#include "common/random_id.h"
#include "gateway/http/api_error.h"

namespace omnistage {
namespace {

using nlohmann::json;

// Past this much waiting for the client, the next response is read only once
// it drained.
constexpr size_t kHighWaterBytes = 256 << 10;

}  // namespace

std::shared_ptr<RealtimeSession> RealtimeSession::Start(std::unique_ptr<HttpUpgrade> upgrade,
                                                        const WebSocketLimits& limits,
                                                        const ServedModel& model, Backend backend,
                                                        std::string authorization,
                                                        TraceHeaders trace, bool stage0_echoes) {
  std::shared_ptr<RealtimeSession> session(new RealtimeSession(
      model, std::move(backend), std::move(authorization), std::move(trace), stage0_echoes));
  RealtimeSession* raw = session.get();
  session->ws_ = WebSocket::Start(
      std::move(upgrade), limits, [raw](std::string text) { raw->OnMessage(text); },
      [raw] { raw->OnClosed(); });
  if (session->ws_ == nullptr) {
    if (session->backend_.ended) session->backend_.ended();
    return nullptr;
  }
  session->self_ = session;
  session->Send(
      ServerEvent(session->ids_, "session.created", {{"session", SessionJson(session->config_)}}));
  session->Send(
      ServerEvent(session->ids_, "conversation.created",
                  {{"conversation",
                    {{"id", session->conversation_id_}, {"object", "realtime.conversation"}}}}));
  return session;
}

RealtimeSession::RealtimeSession(const ServedModel& model, Backend backend,
                                 std::string authorization, TraceHeaders trace, bool stage0_echoes)
    : model_(model),
      backend_(std::move(backend)),
      authorization_(std::move(authorization)),
      stage0_echoes_(stage0_echoes),
      conversation_id_(absl::StrCat("conv_", RandomHex(12))),
      items_(&ids_, &conversation_, [this](const std::string& event) { Send(event); }),
      audio_input_(RealtimeAudioInput::Host{
          &ids_, &conversation_, [this](const std::string& event) { Send(event); },
          [this]() -> std::variant<ChatRequest, RealtimeError> {
            return conversation_.AudioTurnRequest(config_, model_);
          },
          [this](v1::GenerateRequest request, std::shared_ptr<AudioTurn> turn) {
            request.set_session_key(config_.session_id);
            // The call holds the session (as a response's does) until it ended.
            std::shared_ptr<RealtimeSession> self = shared_from_this();
            return RealtimeDuplexCall::Start(
                backend_.stub, std::move(request), authorization_, spans_->Session(), backend_.post,
                {[self, turn](const v1::GenerateResponse& response) {
                   self->TurnResponse(turn, response);
                 },
                 [self, turn](const grpc::Status& status) { self->TurnDone(turn, status); }});
          }}) {
  config_.session_id = absl::StrCat("sess_", RandomHex(12));
  config_.model = model_.id;
  spans_.emplace(backend_.tracer, std::move(trace), config_.session_id);
  if (auto error = audio_input_.Configure(config_.turn_detection)) {
    // Without a detector the session still serves turns committed by hand,
    // and session.created says so (turn_detection null).
    LogWarning(absl::StrCat("realtime session ", config_.session_id, ": ", error->message));
    config_.turn_detection.reset();
  }
}

void RealtimeSession::Send(const std::string& event) {
  if (ws_ != nullptr) ws_->Send(event);
}

void RealtimeSession::SendError(RealtimeError error, const std::string& event_id) {
  error.event_id = event_id;
  Send(ErrorEvent(ids_, error));
}

void RealtimeSession::OnMessage(const std::string& text) {
  // Closing for the drain: what the client sends until its close answers
  // ours would start calls whose events could not be sent.
  if (going_away_ && response_ == nullptr) return;
  std::variant<ClientEvent, RealtimeError> parsed = ParseClientEvent(text);
  if (std::holds_alternative<RealtimeError>(parsed)) {
    Send(ErrorEvent(ids_, std::get<RealtimeError>(parsed)));
    return;
  }
  const ClientEvent& event = std::get<ClientEvent>(parsed);
  const std::string& type = event.type;
  if (type == "session.update") {
    SessionUpdate(event);
  } else if (type == "conversation.item.create") {
    items_.Create(event);
  } else if (type == "conversation.item.delete") {
    items_.Delete(event);
  } else if (type == "conversation.item.retrieve") {
    items_.Retrieve(event);
  } else if (type == "conversation.item.truncate") {
    items_.Truncate(event);
  } else if (type == "response.create") {
    ResponseCreate(event);
  } else if (type == "response.cancel") {
    ResponseCancel(event);
  } else if (type == "input_audio_buffer.append") {
    AudioInput(event, RealtimeAudioInput::Op::kAppend);
  } else if (type == "input_audio_buffer.commit") {
    AudioInput(event, RealtimeAudioInput::Op::kCommit);
  } else if (type == "input_audio_buffer.clear") {
    AudioInput(event, RealtimeAudioInput::Op::kClear);
  } else if (type == "output_audio_buffer.clear" || type == "transcription_session.update") {
    SendError(
        {"unsupported_event", absl::StrCat("'", type, "' is not supported by omnistage."), "type"},
        event.event_id);
  } else {
    SendError(
        {"invalid_value",
         absl::StrCat("Invalid value: '", type, "'. It is no client event of the Realtime API."),
         "type"},
        event.event_id);
  }
}

void RealtimeSession::SessionUpdate(const ClientEvent& event) {
  RealtimeConfig updated = config_;
  if (auto error = ApplySessionUpdate(event.body, &updated)) {
    SendError(*error, event.event_id);
    return;
  }
  if (auto error = audio_input_.Configure(updated.turn_detection)) {
    SendError(*error, event.event_id);
    return;
  }
  config_ = std::move(updated);
  Send(ServerEvent(ids_, "session.updated", {{"session", SessionJson(config_)}}));
}

void RealtimeSession::ResponseCreate(const ClientEvent& event) {
  if (response_ != nullptr) {
    SendError({"conversation_already_has_active_response",
               absl::StrCat("Conversation already has an active response in progress: ",
                            response_->response_id(),
                            ". Wait until the response is finished "
                            "before creating a new one."),
               ""},
              event.event_id);
    return;
  }
  RealtimeConfig config = config_;
  if (auto error = ApplyResponseCreate(event.body, &config)) {
    SendError(*error, event.event_id);
    return;
  }
  if (std::shared_ptr<AudioTurn> turn = audio_input_.TakeCommitted()) {
    Answer(config, std::move(turn));
    return;
  }
  std::variant<ChatRequest, RealtimeError> request = conversation_.Request(config, model_);
  if (std::holds_alternative<RealtimeError>(request)) {
    SendError(std::get<RealtimeError>(request), event.event_id);
    return;
  }
  v1::GenerateRequest generate = std::get<ChatRequest>(std::move(request)).generate;
  // One conversation: its turns prefer the replicas that hold its beginning.
  generate.set_session_key(config.session_id);
  Begin(config, generate.prompt());
  std::shared_ptr<RealtimeSession> self = shared_from_this();
  call_ = RealtimeCall::Start(
      backend_.stub, backend_.fallback, std::move(generate), authorization_, spans_->Response(),
      backend_.post,
      {[self](const v1::GenerateResponse& response) { self->Deliver(response); },
       [self](const grpc::Status& status) { self->Done(status); }});
}

void RealtimeSession::Answer(const RealtimeConfig& config, std::shared_ptr<AudioTurn> turn) {
  // The committed turn's call runs already (with the settings of its
  // first append): it becomes this response's.
  Begin(config, turn->transcript);
  turn_ = turn;
  call_ = turn->call;
  if (turn->held.has_value()) {
    v1::GenerateResponse held = *std::move(turn->held);
    turn->held.reset();
    Deliver(std::move(held));
  } else {
    call_->ReadNext();
  }
}

void RealtimeSession::AnswerDetectedTurn() {
  if (response_ != nullptr || going_away_) return;
  if (std::shared_ptr<AudioTurn> turn = audio_input_.TakeAutoResponse()) {
    Answer(config_, std::move(turn));
  }
}

void RealtimeSession::Interrupt() {
  if (!config_.turn_detection.has_value() || !config_.turn_detection->interrupt_response ||
      response_ == nullptr || cancelled_) {
    return;
  }
  cancelled_ = true;
  interrupted_ = true;
  // What the client can have played by now, at most: audio plays in real time
  // as it comes, from its first delta.
  heard_ms_ = static_cast<int64_t>(
      (player_.audio_seconds() - player_.buffered_seconds(absl::Now())) * 1000);
  call_->Cancel();  // Done() sends response.done (cancelled), then the truncation.
}

void RealtimeSession::Begin(const RealtimeConfig& config, const std::string& prompt) {
  response_ = std::make_unique<RealtimeEncoder>(ids_, config, conversation_id_, prompt);
  got_terminal_ = false;
  cancelled_ = false;
  interrupted_ = false;
  began_ = absl::Now();
  player_ = PlaybackModel();
  spans_->ResponseBegan(response_->response_id());
  Send(response_->Created());
  for (const std::string& e : response_->Begin(conversation_.last_id())) Send(e);
  if (backend_.responses) backend_.responses(1);
}

void RealtimeSession::TurnResponse(const std::shared_ptr<AudioTurn>& turn,
                                   v1::GenerateResponse response) {
  const bool responding = turn == turn_;
  if (audio_input_.Heard(*turn, &response, responding)) return;
  if (responding) {
    Deliver(std::move(response));
  } else {
    turn->call->ReadNext();
  }
}

void RealtimeSession::TurnDone(const std::shared_ptr<AudioTurn>& turn, const grpc::Status& status) {
  if (turn == turn_) {
    Done(status);
  } else {
    audio_input_.Ended(*turn, status, /*responding=*/false);
  }
}

void RealtimeSession::Deliver(v1::GenerateResponse response) {
  // Stage 0's text is the prompt it passed through (an audio turn's took it
  // out already: what was heard).
  if (stage0_echoes_ && turn_ == nullptr) RealtimeAudioInput::TakeStage0Text(&response);
  if (response.has_terminal()) {
    terminal_ = response.terminal();
    got_terminal_ = true;
  }
  if (ws_ == nullptr || !ws_->open()) {
    call_->ReadNext();
    return;
  }
  const int64_t audio_ms = response_->audio_ms();
  for (const std::string& event : response_->Events(response)) Send(event);
  player_.Arrived(static_cast<double>(response_->audio_ms() - audio_ms) / 1000, absl::Now());
  if (response_->failure().has_value()) {
    call_->Cancel();
    return;
  }
  if (ws_->buffered() < kHighWaterBytes) {
    call_->ReadNext();
    return;
  }
  std::weak_ptr<RealtimeSession> weak = weak_from_this();
  ws_->WhenDrained([weak] {
    if (auto self = weak.lock(); self != nullptr && self->call_ != nullptr) {
      self->call_->ReadNext();
    }
  });
}

void RealtimeSession::Done(const grpc::Status& status) {
  RealtimeEncoder::Status how = RealtimeEncoder::Status::kCompleted;
  std::optional<RealtimeError> error = response_->failure();
  if (error.has_value()) {
    how = RealtimeEncoder::Status::kFailed;
  } else if (cancelled_) {
    how =
        interrupted_ ? RealtimeEncoder::Status::kInterrupted : RealtimeEncoder::Status::kCancelled;
  } else if (!status.ok() || !got_terminal_) {
    how = RealtimeEncoder::Status::kFailed;
    error =
        turn_ != nullptr && !status.ok()
            ? RealtimeAudioInput::TurnError(FromGrpcStatus(status))
            : ErrorOfStatus(status.ok() ? absl::InternalError("the stream ended without a terminal")
                                        : FromGrpcStatus(status));
    if (!status.ok() && status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      error->message = ExplainUnreachable(error->message, false);
    }
  } else {
    switch (terminal_.finish_reason()) {
      case v1::FINISH_REASON_LENGTH:
        how = RealtimeEncoder::Status::kIncomplete;
        break;
      case v1::FINISH_REASON_ABORT:
        how = RealtimeEncoder::Status::kCancelled;
        break;
      case v1::FINISH_REASON_ERROR:
        how = RealtimeEncoder::Status::kFailed;
        error = RealtimeAudioInput::TurnError(StatusFromErrorProto(terminal_.error()));
        break;
      default:
        break;
    }
  }
  if (turn_ != nullptr) audio_input_.Ended(*turn_, status, /*responding=*/true);
  spans_->ResponseEnded(RealtimeEncoder::StatusName(how), error ? error->message : "");
  for (const std::string& e : response_->Finish(how, error ? &*error : nullptr)) Send(e);
  // What the assistant said is part of the conversation from here on.
  RealtimeItem item = response_->item();
  std::string previous;
  conversation_.Add(&item, std::nullopt, &previous);
  // Interrupted: the user heard only the audio played until then.
  if (interrupted_ && item.audio) items_.Truncated(item.id, std::min(heard_ms_, item.audio_ms));
  response_.reset();
  call_.reset();
  turn_.reset();
  if (backend_.responses) backend_.responses(-1);
  if (backend_.heard) backend_.heard(player_.Figures(began_));
  if (going_away_) {
    CloseGoingAway();
    return;
  }
  // A turn detected meanwhile is answered now.
  AnswerDetectedTurn();
}

void RealtimeSession::GoAway(bool now) {
  going_away_ = true;
  if (response_ == nullptr) {
    CloseGoingAway();
  } else if (now && !cancelled_) {
    cancelled_ = true;
    call_->Cancel();  // Done() sends response.done (cancelled), then the close.
  }
}

void RealtimeSession::CloseGoingAway() {
  if (ws_ != nullptr) ws_->Close(1001, "the gateway is shutting down");
}

void RealtimeSession::ResponseCancel(const ClientEvent& event) {
  std::variant<std::string, RealtimeError> id = StringField(event.body, "response_id", false);
  if (std::holds_alternative<RealtimeError>(id)) {
    SendError(std::get<RealtimeError>(id), event.event_id);
    return;
  }
  const std::string& wanted = std::get<std::string>(id);
  if (response_ == nullptr || cancelled_) {
    SendError({"response_cancel_not_active", "Cancellation failed: no active response found.", ""},
              event.event_id);
    return;
  }
  if (!wanted.empty() && wanted != response_->response_id()) {
    SendError({"invalid_value",
               absl::StrCat("Response '", wanted, "' is not the active response (",
                            response_->response_id(), ")."),
               "response_id"},
              event.event_id);
    return;
  }
  cancelled_ = true;
  call_->Cancel();  // response.done (cancelled) follows once the call ended.
}

void RealtimeSession::AudioInput(const ClientEvent& event, RealtimeAudioInput::Op op) {
  std::string pcm;
  if (op == RealtimeAudioInput::Op::kAppend) {
    std::variant<std::string, RealtimeError> audio = ParseAudioAppend(event.body);
    if (std::holds_alternative<RealtimeError>(audio)) {
      SendError(std::get<RealtimeError>(audio), event.event_id);
      return;
    }
    pcm = std::get<std::string>(std::move(audio));
  }
  audio_input_.Handle(op, pcm, event.event_id);
  // The user speaks: barge-in.
  if (audio_input_.TakeSpeechStarted()) Interrupt();
  AnswerDetectedTurn();
}

void RealtimeSession::OnClosed() {
  // The client is gone: a running response is aborted on every stage (the
  // call holds the session until it ended).
  if (call_ != nullptr) {
    cancelled_ = true;
    call_->Cancel();
  }
  audio_input_.Close();
  spans_->Close();
  std::unique_ptr<WebSocket> ws = std::move(ws_);
  std::shared_ptr<RealtimeSession> self = std::move(self_);
  if (backend_.ended) backend_.ended();
  // `ws` and then perhaps the session go here; nothing of them is touched after.
}

}  // namespace omnistage
