#include "gateway/transcription_route.h"

#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "gateway/audio/audio_decoder.h"
#include "gateway/audio/audio_resampler.h"
#include "gateway/http/api_error.h"
#include "gateway/http/forwarded_headers.h"
#include "gateway/transcription/transcription_call.h"
#include "gateway/transcription/transcription_request.h"

namespace omnistage {
namespace {

constexpr char kRoute[] = "/v1/audio/transcriptions";

}  // namespace

TranscriptionRoute::TranscriptionRoute(Options options, RouteReplies* replies, LoopPoster post,
                                       const std::atomic<bool>* draining, Counter* fallbacks)
    : options_(std::move(options)), replies_(replies), post_(std::move(post)), draining_(draining) {
  if (!options_.target.address.empty()) {
    orchestrators_ = std::make_unique<Orchestrators>(options_.target, post_, fallbacks);
    decoder_ = std::make_unique<LoopThread>(&decoding_);
  }
}

TranscriptionRoute::~TranscriptionRoute() {
  alive_.End();
  decoder_.reset();  // An upload being decoded finishes; those waiting are dropped.
}

void TranscriptionRoute::Handle(std::shared_ptr<HttpExchange> exchange) {
  if (orchestrators_ == nullptr) {
    replies_->Refuse(*exchange, kRoute,
                     NotServed("This gateway serves no transcriptions: start it with "
                               "--transcription_orchestrator naming the orchestrators of a "
                               "listening pipeline (e.g. pipelines/local_listener.yaml)."));
    return;
  }
  if (exchange->method() != "POST") {
    replies_->Refuse(*exchange, kRoute, MethodNotAllowed(exchange->method(), kRoute, "POST"));
    return;
  }
  Transcribe(std::move(exchange));
}

void TranscriptionRoute::Transcribe(std::shared_ptr<HttpExchange> exchange) {
  std::variant<TranscriptionRequest, ApiError> parsed = ParseTranscriptionRequest(
      exchange->Header("Content-Type"), exchange->body(), options_.models);
  if (std::holds_alternative<ApiError>(parsed)) {
    replies_->Refuse(*exchange, kRoute, std::get<ApiError>(parsed));
    return;
  }
  if (*draining_) {
    replies_->Refuse(*exchange, kRoute,
                     FromStatus(absl::UnavailableError(
                         "the gateway is shutting down; retry (another replica answers)")));
    return;
  }
  std::variant<ForwardedHeaders, ApiError> forwarded = ForwardedHeadersOf(*exchange);
  if (std::holds_alternative<ApiError>(forwarded)) {
    replies_->Refuse(*exchange, kRoute, std::get<ApiError>(forwarded));
    return;
  }
  ++running_;
  auto request = std::make_shared<TranscriptionRequest>(
      std::get<TranscriptionRequest>(std::move(parsed)));
  auto headers = std::make_shared<ForwardedHeaders>(std::get<ForwardedHeaders>(std::move(forwarded)));
  decoding_.Post([this, alive = alive_.watch(), request, headers, exchange] {
    const absl::Time began = absl::Now();
    absl::StatusOr<DecodedAudio> decoded = DecodeAudioFile(request->file, options_.max_seconds);
    auto audio = std::make_shared<TranscriptionAudio>();
    absl::Status status = decoded.status();
    if (decoded.ok()) {
      absl::StatusOr<std::vector<int16_t>> resampled =
          ResampleMono(decoded->mono, decoded->sample_rate_hz, options_.sample_rate_hz);
      status = resampled.status();
      if (resampled.ok()) {
        audio->samples = *std::move(resampled);
        audio->sample_rate_hz = options_.sample_rate_hz;
        LogInfo({}, absl::StrFormat("transcription: %s '%s', %.2f s of %s at %d Hz, %d channel(s), "
                                    "decoded and resampled in %s",
                                    request->model, request->filename, decoded->seconds(),
                                    decoded->format, decoded->sample_rate_hz, decoded->channels,
                                    absl::FormatDuration(absl::Now() - began)));
      }
    }
    request->file.clear();
    post_([this, alive, request, headers, exchange, audio, status] {
      if (!alive) return;
      if (exchange->done()) {  // The client went away meanwhile.
        --running_;
        replies_->Count(kRoute, 499);
        return;
      }
      if (!status.ok()) {
        --running_;
        ApiError refused = FromStatus(status);
        if (status.code() == absl::StatusCode::kInvalidArgument) refused.param = "file";
        replies_->Refuse(*exchange, kRoute, refused);
        return;
      }
      TranscriptionCall::Start(orchestrators_->ready(), orchestrators_->tls(), std::move(*request),
                               std::move(*audio), std::move(headers->authorization),
                               std::move(headers->trace), exchange, post_,
                               [this](const CallOutcome& outcome) {
                                 --running_;
                                 replies_->Count(kRoute, outcome.http_status);
                               });
    });
  });
}

}  // namespace omnistage
