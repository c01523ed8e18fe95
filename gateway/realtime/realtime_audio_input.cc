#include "gateway/realtime/realtime_audio_input.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/error_proto.h"
#include "common/field_error.h"
#include "common/grpc/grpc_util.h"

namespace omnistage {
namespace {

using nlohmann::json;

// The one input format served (session.update refuses others).
constexpr int kSampleRateHz = 24000;
constexpr char kSendText[] = "; send text with conversation.item.create.";

RealtimeError Refusal(const char* code, std::string message, const char* type) {
  return RealtimeError{code, std::move(message), "", type};
}

}  // namespace

RealtimeAudioInput::RealtimeAudioInput(Host host) : host_(std::move(host)) {}

RealtimeError RealtimeAudioInput::TurnError(const absl::Status& status) {
  const std::string message(status.message());
  // Stage 0 takes its input whole (GenerateDuplex's refusal), or takes no
  // audio (its engine's, for the first chunk: the batching engines say
  // "... is audio, but this engine accepts text").
  if (status.code() == absl::StatusCode::kFailedPrecondition ||
      (status.code() == absl::StatusCode::kInvalidArgument &&
       absl::StrContains(message, "is audio, but this engine accepts"))) {
    return Refusal("input_audio_not_supported",
                   absl::StrCat("This pipeline does not take audio (", message, ")", kSendText),
                   "invalid_request_error");
  }
  // The orchestrator's limits on streamed input (docs/clients.md), by the
  // config field its error names.
  const std::string field = ErrorField(status);
  if (field == "limits.max_input_bytes") {
    return Refusal("input_audio_buffer_too_large",
                   absl::StrCat("The audio turn is longer than the pipeline takes (", message,
                                "); commit sooner."),
                   "invalid_request_error");
  }
  if (field == "limits.max_input_chunk_bytes") {
    return Refusal("input_audio_chunk_too_large",
                   absl::StrCat("An input_audio_buffer.append is larger than the pipeline "
                                "takes in one piece (",
                                message, "); append smaller pieces."),
                   "invalid_request_error");
  }
  if (field == "limits.input_idle_ms") {
    return Refusal("input_audio_idle_timeout",
                   absl::StrCat("The audio turn waited too long for more audio or its commit (",
                                message, ")."),
                   "invalid_request_error");
  }
  return ErrorOfStatus(status);
}

std::string RealtimeAudioInput::TakeStage0Text(v1::GenerateResponse* response) {
  std::string text;
  auto* outputs = response->mutable_outputs();
  auto rest = std::remove_if(outputs->begin(), outputs->end(), [&](const v1::OutputChunk& c) {
    if (c.stage_id() != 0 || !c.payload().has_text()) return false;
    text += c.payload().text().text();
    return true;
  });
  outputs->erase(rest, outputs->end());
  return text;
}

void RealtimeAudioInput::SendError(RealtimeError error, const std::string& event_id) {
  error.event_id = event_id;
  host_.send(ErrorEvent(*host_.ids, error));
}

void RealtimeAudioInput::Handle(Op op, const std::string& pcm, const std::string& event_id) {
  // Detected turns are refused at their start, not at each append.
  if (unsupported_.has_value() && !(op == Op::kAppend && detector_.detecting())) {
    SendError(*unsupported_, event_id);
    return;
  }
  switch (op) {
    case Op::kAppend:
      Append(pcm, event_id);
      break;
    case Op::kCommit:
      Commit(event_id);
      // A detected turn going on ends here (speech still going on starts the
      // next), and what was held is gone.
      detector_.Reset();
      ignoring_ = false;
      break;
    case Op::kClear:
      Clear(event_id);
      break;
  }
}

std::optional<RealtimeError> RealtimeAudioInput::Configure(
    const std::optional<TurnDetection>& turns) {
  std::optional<VoiceActivityOptions> options;
  if (turns.has_value()) {
    options = VoiceActivityOptions{turns->threshold, turns->prefix_padding_ms,
                                   turns->silence_duration_ms};
  }
  if (absl::Status status = detector_.Configure(options); !status.ok()) {
    return RealtimeError{"turn_detection_unavailable",
                         absl::StrCat("Turn detection could not be set up: ", status.message()),
                         "session.audio.input.turn_detection", "server_error"};
  }
  turns_ = turns;
  return std::nullopt;
}

void RealtimeAudioInput::Append(const std::string& pcm, const std::string& event_id) {
  if (pcm.empty() || pcm.size() % 2 != 0) {
    SendError({"invalid_value",
               absl::StrCat("Invalid 'audio': ", pcm.size(),
                            " bytes, not whole 16-bit samples (audio/pcm: 16-bit little-endian "
                            "mono at 24000 Hz)."),
               "audio"},
              event_id);
    return;
  }
  if (detector_.detecting()) {
    Detect(pcm, event_id);
    return;
  }
  detector_.Push(pcm);  // The session's audio clock runs all the same.
  if (Pending("A committed audio turn waits for its response: send response.create before "
              "the next turn's audio.",
              event_id)) {
    return;
  }
  if (turn_ == nullptr && !Open(event_id)) return;
  SendAudio(pcm);
}

bool RealtimeAudioInput::Pending(const char* message, const std::string& event_id) {
  if (turn_ == nullptr || !turn_->committed) return false;
  SendError({"input_audio_turn_pending", message, ""}, event_id);
  return true;
}

bool RealtimeAudioInput::Open(const std::string& event_id) {
  std::variant<ChatRequest, RealtimeError> request = host_.request();
  if (auto* error = std::get_if<RealtimeError>(&request)) {
    SendError(*error, event_id);
    return false;
  }
  v1::GenerateRequest generate = std::get<ChatRequest>(std::move(request)).generate;
  auto turn = std::make_shared<AudioTurn>();
  turn->echo_left = generate.prompt().size();
  turn->event_id = event_id;
  turn->call = host_.open(std::move(generate), turn);
  turn_ = std::move(turn);
  return true;
}

void RealtimeAudioInput::SendAudio(const std::string& pcm) {
  v1::InputChunk chunk;
  v1::AudioChunk* audio = chunk.add_payloads()->mutable_audio();
  audio->set_pcm_s16le(pcm);
  audio->set_sample_rate_hz(kSampleRateHz);
  audio->set_channels(1);
  turn_->audio_bytes += static_cast<int64_t>(pcm.size());
  turn_->call->Send(std::move(chunk));
}

void RealtimeAudioInput::Detect(const std::string& pcm, const std::string& event_id) {
  for (TurnPiece& piece : detector_.Push(pcm)) {
    switch (piece.kind) {
      case TurnPiece::kSpeechStarted:
        SpeechStarted(piece.audio_ms, event_id);
        break;
      case TurnPiece::kAudio:
        if (!ignoring_ && turn_ != nullptr && !turn_->committed) SendAudio(piece.pcm);
        break;
      case TurnPiece::kSpeechStopped:
        SpeechStopped(piece.audio_ms, event_id);
        break;
    }
  }
}

void RealtimeAudioInput::SpeechStarted(int64_t audio_start_ms, const std::string& event_id) {
  speech_started_ = true;
  ignoring_ = true;  // Until the turn is open.
  if (unsupported_.has_value()) {
    SendError(*unsupported_, event_id);
    return;
  }
  if (Pending("Speech was heard while a committed audio turn waits for its response: it is "
              "not heard. Send response.create (or let the running response end) first.",
              event_id)) {
    return;
  }
  // A turn the client opened by hand before detection was on becomes this one.
  if (turn_ == nullptr && !Open(event_id)) return;
  ignoring_ = false;
  turn_->detected = true;
  if (turn_->item_id.empty()) turn_->item_id = NewItemId();
  host_.send(ServerEvent(*host_.ids, "input_audio_buffer.speech_started",
                         {{"audio_start_ms", audio_start_ms}, {"item_id", turn_->item_id}}));
}

void RealtimeAudioInput::SpeechStopped(int64_t audio_end_ms, const std::string& event_id) {
  if (ignoring_) {
    ignoring_ = false;
    return;
  }
  // The turn failed meanwhile (and the client was told), or was committed.
  if (turn_ == nullptr || turn_->committed) return;
  host_.send(ServerEvent(*host_.ids, "input_audio_buffer.speech_stopped",
                         {{"audio_end_ms", audio_end_ms}, {"item_id", turn_->item_id}}));
  std::shared_ptr<AudioTurn> turn = turn_;
  if (!Commit(event_id)) {
    // Not in the conversation (it is full): the turn is given up.
    turn->failed = true;
    turn->call->Cancel();
    turn_.reset();
    return;
  }
  turn->respond = turns_.has_value() && turns_->create_response;
}

bool RealtimeAudioInput::Commit(const std::string& event_id) {
  if (turn_ == nullptr && detector_.detecting()) {
    // No speech heard: what the buffer holds is the turn.
    std::string held = detector_.TakeHeld();
    if (!held.empty()) {
      if (!Open(event_id)) return false;
      SendAudio(held);
    }
  }
  if (turn_ == nullptr || turn_->committed) {
    SendError({"input_audio_buffer_commit_empty",
               "Error committing input audio buffer: it is empty (no input_audio_buffer.append "
               "since the last commit or clear).",
               ""},
              event_id);
    return false;
  }
  RealtimeItem item;
  item.id = turn_->item_id;
  item.role = "user";
  item.input_audio = true;
  item.text = turn_->transcript;
  std::string previous;
  if (auto error = host_.conversation->Add(&item, std::nullopt, &previous)) {
    SendError(*error, event_id);
    return false;
  }
  v1::InputChunk last;
  last.set_last(true);
  turn_->call->Send(std::move(last));
  turn_->committed = true;
  turn_->item_id = item.id;
  const json before = previous.empty() ? json(nullptr) : json(previous);
  const json shown = ItemJson(item);
  host_.send(ServerEvent(*host_.ids, "input_audio_buffer.committed",
                         {{"previous_item_id", before}, {"item_id", item.id}}));
  host_.send(ServerEvent(*host_.ids, "conversation.item.added",
                         {{"item", shown}, {"previous_item_id", before}}));
  host_.send(ServerEvent(*host_.ids, "conversation.item.done",
                         {{"item", shown}, {"previous_item_id", before}}));
  // What was heard before the item existed.
  if (!turn_->transcript.empty()) SendTranscriptDelta(*turn_, turn_->transcript);
  return true;
}

void RealtimeAudioInput::Clear(const std::string& event_id) {
  detector_.Reset();
  ignoring_ = false;
  if (turn_ != nullptr && !turn_->committed) {
    turn_->failed = true;  // Its end tells the client nothing more.
    turn_->call->Cancel();
    turn_.reset();
  }
  host_.send(ServerEvent(*host_.ids, "input_audio_buffer.cleared", json::object()));
}

std::shared_ptr<AudioTurn> RealtimeAudioInput::TakeCommitted() {
  if (turn_ == nullptr || !turn_->committed) return nullptr;
  return std::move(turn_);
}

std::shared_ptr<AudioTurn> RealtimeAudioInput::TakeAutoResponse() {
  if (turn_ == nullptr || !turn_->committed || !turn_->respond) return nullptr;
  return std::move(turn_);
}

bool RealtimeAudioInput::TakeSpeechStarted() {
  return std::exchange(speech_started_, false);
}

void RealtimeAudioInput::SendTranscriptDelta(const AudioTurn& turn, const std::string& delta) {
  host_.send(ServerEvent(*host_.ids, "conversation.item.input_audio_transcription.delta",
                         {{"item_id", turn.item_id}, {"content_index", 0}, {"delta", delta}}));
}

bool RealtimeAudioInput::Heard(AudioTurn& turn, v1::GenerateResponse* response,
                               bool responding) {
  std::string text = TakeStage0Text(response);
  const size_t echo = std::min(turn.echo_left, text.size());
  turn.echo_left -= echo;
  text.erase(0, echo);
  if (!text.empty()) {
    turn.heard_text = true;
    turn.transcript += text;
    if (turn.committed) {
      host_.conversation->SetText(turn.item_id, turn.transcript);
      SendTranscriptDelta(turn, text);
    }
  }
  if (responding) return false;
  if (response->has_terminal() &&
      response->terminal().finish_reason() == v1::FINISH_REASON_ERROR) {
    Fail(turn, StatusFromErrorProto(response->terminal().error()));
    return true;
  }
  if (response->outputs_size() == 0 && !response->has_terminal()) return false;
  turn.held = std::move(*response);
  return true;
}

void RealtimeAudioInput::Fail(AudioTurn& turn, const absl::Status& status) {
  turn.failed = true;
  RealtimeError error = TurnError(status);
  if (error.code == "input_audio_not_supported") unsupported_ = error;
  SendError(std::move(error), turn.event_id);
  turn.call->Cancel();
  if (turn_.get() == &turn) turn_.reset();
}

void RealtimeAudioInput::Ended(AudioTurn& turn, const grpc::Status& status, bool responding) {
  if (responding) {
    if (!turn.heard_text) return;
    const double seconds = static_cast<double>(turn.audio_bytes) / (2 * kSampleRateHz);
    host_.send(ServerEvent(*host_.ids, "conversation.item.input_audio_transcription.completed",
                           {{"item_id", turn.item_id},
                            {"content_index", 0},
                            {"transcript", turn.transcript},
                            {"usage", {{"type", "duration"}, {"seconds", seconds}}}}));
    return;
  }
  if (turn.failed) return;
  Fail(turn, status.ok() ? absl::InternalError("the audio turn's call ended before its response")
                         : FromGrpcStatus(status));
}

void RealtimeAudioInput::Close() {
  if (turn_ == nullptr) return;
  turn_->failed = true;
  turn_->call->Cancel();
  turn_.reset();
}

}  // namespace omnistage
