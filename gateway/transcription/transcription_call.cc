#include "gateway/transcription/transcription_call.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/pcm16.h"
#include "gateway/chat/chat_response.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

constexpr char kEventStream[] = "text/event-stream";
constexpr char kJson[] = "application/json";

std::string SseEvent(const nlohmann::json& event) {
  return absl::StrCat("data: ", event.dump(), "\n\n");
}

}  // namespace

TranscriptionCall::TranscriptionCall(TranscriptionRequest request, TranscriptionAudio audio,
                                     TraceHeaders trace, std::shared_ptr<HttpExchange> exchange,
                                     LoopPoster post, CallObserver observer)
    : ResponseReader(std::move(post), CallFallback()),
      request_(std::move(request)),
      audio_(std::move(audio)),
      trace_(std::move(trace)),
      exchange_(std::move(exchange)),
      observer_(std::move(observer)),
      transcript_(audio_.sample_rate_hz > 0
                      ? static_cast<int64_t>(audio_.samples.size()) * 1000 / audio_.sample_rate_hz
                      : 0) {}

void TranscriptionCall::Start(v1::Orchestrator::Stub* stub, bool orchestrator_tls,
                              TranscriptionRequest request, TranscriptionAudio audio,
                              std::string authorization, TraceHeaders trace,
                              std::shared_ptr<HttpExchange> exchange, LoopPoster post,
                              CallObserver observer) {
  auto* call = new TranscriptionCall(std::move(request), std::move(audio), std::move(trace),
                                     std::move(exchange), std::move(post), std::move(observer));
  call->orchestrator_tls_ = orchestrator_tls;
  if (!authorization.empty()) call->context_.AddMetadata("authorization", authorization);
  call->trace_.AddTo(call->context_);
  call->exchange_->OnClose([call] { call->Cancel(); });
  stub->async()->GenerateDuplex(&call->context_, call);
  // The request first: the transcript is the first stage's text. Every later
  // write starts from the one before's OnWriteDone.
  v1::GenerateRequest* generate = call->writing_.mutable_request();
  generate->add_output_modalities(v1::MODALITY_TEXT);
  call->StartWrite(&call->writing_);
  call->BeginReading();
  call->StartCall();
}

bool TranscriptionCall::NextChunk() {
  if (sent_last_) return false;
  const size_t total = audio_.samples.size();
  const size_t count =
      std::min(total - next_sample_, static_cast<size_t>(audio_.sample_rate_hz) * kChunkSeconds);
  writing_.Clear();
  v1::InputChunk* chunk = writing_.mutable_input();
  if (count > 0) {
    v1::AudioChunk* pcm = chunk->add_payloads()->mutable_audio();
    AppendPcmS16le(absl::MakeConstSpan(audio_.samples).subspan(next_sample_, count),
                   pcm->mutable_pcm_s16le());
    pcm->set_sample_rate_hz(audio_.sample_rate_hz);
    pcm->set_channels(1);
  }
  next_sample_ += count;
  if (next_sample_ >= total) {
    chunk->set_last(true);
    sent_last_ = true;
  }
  return true;
}

void TranscriptionCall::OnWriteDone(bool ok) {
  // Not ok: the call ended (its status says why); nothing more is written.
  if (!ok) return;
  const bool was_last = writing_.has_input() && writing_.input().last();
  if (was_last) {
    StartWritesDone();
    return;
  }
  if (NextChunk()) StartWrite(&writing_);
}

void TranscriptionCall::OnWritesDoneDone(bool) {}

void TranscriptionCall::Deliver(const v1::GenerateResponse& response) {
  got_response_ = true;
  if (!response.request_id().empty()) request_id_ = response.request_id();
  if (response.has_terminal()) {
    terminal_ = response.terminal();
    got_terminal_ = true;
  }
  std::string delta;
  for (const v1::OutputChunk& chunk : response.outputs()) {
    // The first stage hears; what later stages say (a pipeline that goes on
    // to answer) is not the transcript.
    if (chunk.stage_id() != 0 || !chunk.payload().has_text()) continue;
    delta += transcript_.Add(chunk.payload().text());
  }
  if (request_.stream && response.has_terminal()) {
    terminal_delta_ += delta;  // Goes with the end, in one write.
  } else if (request_.stream && !delta.empty() && !exchange_->done()) {
    if (!exchange_->streaming()) exchange_->StartStream(200, kEventStream);
    exchange_->Send(SseEvent({{"type", "transcript.text.delta"}, {"delta", delta}}),
                    [this] { ReadNext(); });
    return;
  }
  ReadNext();
}

std::string TranscriptionCall::Body() const {
  if (request_.format == "text") return transcript_.Text();
  if (request_.format == "verbose_json") return transcript_.VerboseJson(request_.words);
  if (request_.format == "srt") return transcript_.Srt();
  if (request_.format == "vtt") return transcript_.Vtt();
  return transcript_.Json();
}

const char* TranscriptionCall::ContentType() const {
  if (request_.format == "text" || request_.format == "srt") return "text/plain; charset=utf-8";
  if (request_.format == "vtt") return "text/vtt; charset=utf-8";
  return kJson;
}

void TranscriptionCall::AnswerError(const ApiError& error, const char* outcome) {
  RespondError(*exchange_, error);
  Finish(error.http_status, outcome, error.message);
}

void TranscriptionCall::Break(const std::string& why) {
  LogWarning({request_id_, -1, -1, ""},
             absl::StrCat("transcription: the stream broke after it began: ", why));
  ApiError broke =
      FromStatus(absl::InternalError(absl::StrCat("the stream broke before its end: ", why)));
  exchange_->Send(absl::StrCat("data: ", broke.Json(), "\n\n"));
  exchange_->EndStream();
  Finish(200, "error", why);
}

void TranscriptionCall::Finish(int http_status, std::string outcome, std::string error) {
  observer_({http_status, request_id_, std::move(outcome), std::move(error), {}});
}

void TranscriptionCall::Ended(const grpc::Status& status) {
  if (exchange_->done()) {
    Finish(exchange_->streaming() ? 200 : 499, "client_closed");
    return;
  }
  if (std::optional<EndFailure> failed =
          FailureOfEnd(status, got_response_, got_terminal_ ? &terminal_ : nullptr,
                       orchestrator_tls_, TerminalApiError)) {
    if (exchange_->streaming()) {
      Break(failed->error.message);
    } else {
      AnswerError(failed->error, failed->outcome);
    }
    return;
  }
  if (!request_.stream) {
    exchange_->Respond(200, ContentType(), Body());
    Finish(200, OutcomeOf(terminal_));
    return;
  }
  std::string last;
  if (!terminal_delta_.empty()) {
    last += SseEvent({{"type", "transcript.text.delta"}, {"delta", terminal_delta_}});
  }
  last += SseEvent({{"type", "transcript.text.done"},
                    {"text", transcript_.text()},
                    {"usage", {{"type", "duration"}, {"seconds", transcript_.billed_seconds()}}}});
  if (!exchange_->streaming()) exchange_->StartStream(200, kEventStream);
  exchange_->Send(last);
  exchange_->EndStream();
  Finish(200, OutcomeOf(terminal_));
}

}  // namespace omnistage
