#include "gateway/speech/speech_call.h"

#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/pcm16.h"
#include "gateway/chat/chat_response.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

constexpr char kEventStream[] = "text/event-stream";

std::string SseEvent(const nlohmann::json& event) {
  return absl::StrCat("data: ", event.dump(), "\n\n");
}

}  // namespace

SpeechCall::SpeechCall(SpeechRequest request, int voice_stage, std::string authorization,
                       TraceHeaders trace, std::shared_ptr<HttpReply> exchange, LoopPoster post,
                       CallObserver observer, CallFallback fallback)
    : ResponseReader(std::move(post), fallback),
      request_(std::move(request)),
      voice_stage_(voice_stage),
      authorization_(std::move(authorization)),
      trace_(std::move(trace)),
      exchange_(std::move(exchange)),
      observer_(std::move(observer)) {}

void SpeechCall::Start(v1::Orchestrator::Stub* stub, CallFallback fallback, bool orchestrator_tls,
                       SpeechRequest request, int voice_stage, std::string authorization,
                       TraceHeaders trace, std::shared_ptr<HttpReply> exchange, LoopPoster post,
                       CallObserver observer) {
  auto* call =
      new SpeechCall(std::move(request), voice_stage, std::move(authorization), std::move(trace),
                     std::move(exchange), std::move(post), std::move(observer), fallback);
  call->orchestrator_tls_ = orchestrator_tls;
  call->Begin(stub);
}

void SpeechCall::Begin(v1::Orchestrator::Stub* stub) {
  if (!authorization_.empty()) context_.AddMetadata("authorization", authorization_);
  trace_.AddTo(context_);
  exchange_->OnClose([this] { Cancel(); });
  v1::GenerateRequest generate = request_.generate;
  stub->async()->Generate(&context_, &generate, this);
  BeginReading();
  StartCall();
}

void SpeechCall::Retry(v1::Orchestrator::Stub* stub) {
  auto* again = new SpeechCall(request_, voice_stage_, authorization_, trace_, exchange_, post(),
                               observer_, CallFallback());
  again->orchestrator_tls_ = orchestrator_tls_;
  again->Begin(stub);
}

std::string SpeechCall::Framed(const std::string& encoded) const {
  if (!request_.sse || encoded.empty()) return encoded;
  return SseEvent({{"type", "speech.audio.delta"}, {"audio", absl::Base64Escape(encoded)}});
}

absl::Status SpeechCall::Encode(const v1::GenerateResponse& response, std::string* out) {
  std::string encoded;
  std::vector<int16_t> samples;
  for (const v1::OutputChunk& chunk : response.outputs()) {
    if (!chunk.payload().has_audio()) continue;  // The talker's codes, were they shown.
    const v1::AudioChunk& audio = chunk.payload().audio();
    if (audio.channels() > 1) {
      return absl::InternalError(
          absl::StrCat("the pipeline spoke ", audio.channels(), " channels; speech is mono"));
    }
    if (encoder_ == nullptr) {
      absl::StatusOr<std::unique_ptr<AudioEncoder>> made =
          MakeAudioEncoder(request_.format, audio.sample_rate_hz());
      if (!made.ok()) return made.status();
      encoder_ = *std::move(made);
      sample_rate_hz_ = audio.sample_rate_hz();
    } else if (audio.sample_rate_hz() != sample_rate_hz_) {
      return absl::InternalError(absl::StrCat("the pipeline's audio changed its rate from ",
                                              sample_rate_hz_, " to ", audio.sample_rate_hz(),
                                              " Hz"));
    }
    samples = MonoSamples(audio.pcm_s16le(), 1);
    samples_ += static_cast<int64_t>(samples.size());
    if (absl::Status s = encoder_->Encode(samples, &encoded); !s.ok()) return s;
  }
  *out += Framed(encoded);
  return absl::OkStatus();
}

absl::Status SpeechCall::Flush(std::string* out) {
  std::string encoded;
  if (encoder_ == nullptr) {
    // Nothing was spoken (a text of no words): still a stream of the format.
    absl::StatusOr<std::unique_ptr<AudioEncoder>> made = MakeAudioEncoder(request_.format, 24000);
    if (!made.ok()) return made.status();
    encoder_ = *std::move(made);
  }
  if (absl::Status s = encoder_->Finish(&encoded); !s.ok()) return s;
  *out += Framed(encoded);
  if (request_.sse) {
    // Tokens as OpenAI counts them for speech: the input's words, no output
    // tokens (audio is counted in seconds, not tokens, here).
    const int64_t input_tokens = static_cast<int64_t>(request_.generate.prompt().size() + 3) / 4;
    *out += SseEvent(
        {{"type", "speech.audio.done"},
         {"usage",
          {{"input_tokens", input_tokens}, {"output_tokens", 0}, {"total_tokens", input_tokens}}}});
  }
  return absl::OkStatus();
}

void SpeechCall::Deliver(const v1::GenerateResponse& response) {
  got_response_ = true;
  if (!response.request_id().empty()) request_id_ = response.request_id();
  if (response.has_terminal()) {
    terminal_ = response.terminal();
    got_terminal_ = true;
  }
  if (exchange_->done()) {  // The client went away: drain until the cancel lands.
    ReadNext();
    return;
  }
  std::string bytes;
  if (absl::Status s = Encode(response, &bytes); !s.ok()) {
    broken_ = s;  // The request stops everywhere; Ended answers with why.
    Cancel();
    return;
  }
  const double audio_seconds = AudioSecondsIn(response);
  if (response.has_terminal()) {  // Written with the end, in one write.
    held_ += bytes;
    held_audio_seconds_ += audio_seconds;
    ReadNext();
    return;
  }
  if (bytes.empty()) {
    // An encoder that holds samples for a whole frame sends them later.
    held_audio_seconds_ += audio_seconds;
    ReadNext();
    return;
  }
  if (!exchange_->streaming()) {
    exchange_->StartStream(200, request_.sse ? kEventStream : encoder_->content_type());
  }
  player_.Arrived(held_audio_seconds_ + audio_seconds, absl::Now());
  held_audio_seconds_ = 0;
  exchange_->Send(bytes, [this] { ReadNext(); });
}

ApiError SpeechCall::TerminalError(const v1::Terminal& terminal) const {
  ApiError refused = TerminalApiError(terminal);
  const v1::Error& error = terminal.error();
  // The worker names the field of its request; the client wrote voice, speed.
  if (error.stage_id() == voice_stage_) {
    if (error.field() == "params.extra.voice") refused.param = "voice";
    if (error.field() == "params.extra.speed") refused.param = "speed";
  }
  return refused;
}

void SpeechCall::AnswerError(const ApiError& error, const char* outcome) {
  RespondError(*exchange_, error);
  Finish(error.http_status, outcome, error.message);
}

void SpeechCall::Break(const std::string& why) {
  LogWarning({request_id_, -1, -1, ""},
             absl::StrCat("speech: the stream broke after its audio began: ", why));
  std::string last = held_;
  if (request_.sse) {
    ApiError broke =
        FromStatus(absl::InternalError(absl::StrCat("the stream broke before its end: ", why)));
    last += absl::StrCat("data: ", broke.Json(), "\n\n");
  }
  player_.Arrived(held_audio_seconds_, absl::Now());
  exchange_->Send(last);
  exchange_->EndStream();
  Finish(200, "error", why);
}

void SpeechCall::Finish(int http_status, std::string outcome, std::string error) {
  observer_(
      {http_status, request_id_, std::move(outcome), std::move(error), player_.Figures(started_)});
}

void SpeechCall::Ended(const grpc::Status& status) {
  if (exchange_->done()) {
    Finish(exchange_->streaming() ? 200 : 499, "client_closed");
    return;
  }
  if (!broken_.ok()) {
    if (exchange_->streaming()) {
      Break(std::string(broken_.message()));
    } else {
      AnswerError(FromStatus(broken_), "error");
    }
    return;
  }
  if (std::optional<EndFailure> failed = FailureOfEnd(
          status, got_response_, got_terminal_ ? &terminal_ : nullptr, orchestrator_tls_,
          [this](const v1::Terminal& terminal) { return TerminalError(terminal); })) {
    if (exchange_->streaming()) {
      Break(failed->error.message);
    } else {
      AnswerError(failed->error, failed->outcome);
    }
    return;
  }
  std::string last = held_;
  if (absl::Status s = Flush(&last); !s.ok()) {
    if (exchange_->streaming()) {
      Break(std::string(s.message()));
    } else {
      AnswerError(FromStatus(s), "error");
    }
    return;
  }
  if (!exchange_->streaming()) {
    exchange_->StartStream(200, request_.sse ? kEventStream : encoder_->content_type());
  }
  player_.Arrived(held_audio_seconds_, absl::Now());
  exchange_->Send(last);
  exchange_->EndStream();
  Finish(200, OutcomeOf(terminal_));
}

}  // namespace omnistage
