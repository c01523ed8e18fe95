#include "gateway/speech_route.h"

#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "gateway/http/api_error.h"
#include "gateway/http/forwarded_headers.h"
#include "gateway/speech/speech_call.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

constexpr char kSpeechRoute[] = "/v1/audio/speech";
constexpr char kVoicesRoute[] = "/v1/audio/voices";

// OpenAI's voices, which the speech route takes (each an espeak-ng variant:
// VoiceVariant()).
constexpr const char* kVoices[] = {"alloy", "ash",  "ballad", "coral",   "echo", "fable",
                                   "nova",  "onyx", "sage",   "shimmer", "verse"};

}  // namespace

SpeechRoute::SpeechRoute(Options options, RouteReplies* replies, LoopPoster post,
                         const std::atomic<bool>* draining, Counter* fallbacks)
    : models_(std::move(options.models)),
      replies_(replies),
      post_(std::move(post)),
      draining_(draining) {
  if (!options.target.address.empty()) {
    orchestrators_ = std::make_unique<Orchestrators>(options.target, post_, fallbacks);
  }
}

void SpeechRoute::Handle(std::shared_ptr<HttpExchange> exchange) {
  const std::string& path = exchange->path();
  const std::string& method = exchange->method();
  if (orchestrators_ == nullptr) {
    replies_->Refuse(*exchange, path,
                     NotServed("This gateway serves no speech: start it with "
                               "--speech_orchestrator naming the orchestrators of a speech "
                               "pipeline (e.g. pipelines/local_tts.yaml)."));
    return;
  }
  if (path == kSpeechRoute && method == "POST") {
    Speech(std::move(exchange));
  } else if (path == kVoicesRoute && method == "GET") {
    Voices(*exchange);
  } else {
    replies_->Refuse(*exchange, path,
                     MethodNotAllowed(method, path, path == kSpeechRoute ? "POST" : "GET"));
  }
}

void SpeechRoute::Voices(HttpExchange& exchange) {
  nlohmann::json voices = nlohmann::json::array();
  for (const char* voice : kVoices) {
    voices.push_back({{"id", voice}, {"name", voice}, {"object", "voice"}});
  }
  replies_->Respond(exchange, 200, "application/json",
                    nlohmann::json({{"object", "list"}, {"data", voices}}).dump());
}

void SpeechRoute::Speech(std::shared_ptr<HttpExchange> exchange) {
  std::variant<SpeechRequest, ApiError> parsed = ParseSpeechRequest(exchange->body(), models_);
  if (std::holds_alternative<ApiError>(parsed)) {
    replies_->Refuse(*exchange, kSpeechRoute, std::get<ApiError>(parsed));
    return;
  }
  if (*draining_) {
    replies_->Refuse(*exchange, kSpeechRoute,
                     FromStatus(absl::UnavailableError(
                         "the gateway is shutting down; retry (another replica answers)")));
    return;
  }
  std::variant<ForwardedHeaders, ApiError> forwarded = ForwardedHeadersOf(*exchange);
  if (std::holds_alternative<ApiError>(forwarded)) {
    replies_->Refuse(*exchange, kSpeechRoute, std::get<ApiError>(forwarded));
    return;
  }
  ForwardedHeaders& headers = std::get<ForwardedHeaders>(forwarded);
  ++running_;
  SpeechCall::Start(orchestrators_->ready(), orchestrators_->fallback(), orchestrators_->tls(),
                    std::get<SpeechRequest>(std::move(parsed)), models_.voice_stage,
                    std::move(headers.authorization), std::move(headers.trace), exchange,
                    post_, [this](const CallOutcome& outcome) {
                      --running_;
                      replies_->Count(kSpeechRoute, outcome.http_status);
                      replies_->Heard(kSpeechRoute, outcome.heard);
                    });
}

}  // namespace omnistage
