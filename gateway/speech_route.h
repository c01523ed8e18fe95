// SpeechRoute: the gateway's text-to-speech routes (docs/openai.md, "Speech"):
//   POST /v1/audio/speech   the input spoken by the speech pipeline, streamed
//                           out in the format asked (speech/speech_call.h)
//   GET  /v1/audio/voices   the voices that route takes by OpenAI's names
//
// The speech pipeline is one that speaks the text it is given as written (a
// talker and a vocoder: pipelines/local_tts.yaml), served by the orchestrators
// --speech_orchestrator names, reached through channels of their own
// (orchestrators.h). Without it both routes answer 404, saying how to serve
// speech.
//
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_SPEECH_ROUTE_H_
#define OMNISTAGE_GATEWAY_SPEECH_ROUTE_H_

#include <atomic>
#include <memory>
#include <string>

#include "gateway/http/http_server.h"
#include "gateway/orchestrators.h"
#include "gateway/route_replies.h"
#include "gateway/speech/speech_request.h"

namespace omnistage {

class SpeechRoute {
 public:
  struct Options {
    // The speech pipeline's orchestrators (Orchestrators::Target); an empty
    // address serves no speech.
    Orchestrators::Target target;
    SpeechModels models;
  };

  // `replies` and `fallbacks` are not owned and outlive the route. `draining`
  // is the gateway's: once set, requests get 503.
  SpeechRoute(Options options, RouteReplies* replies, LoopPoster post,
              const std::atomic<bool>* draining, Counter* fallbacks);

  // A request to /v1/audio/speech or /v1/audio/voices.
  void Handle(std::shared_ptr<HttpExchange> exchange);
  // Speech requests running. Thread-safe.
  int running() const { return running_.load(); }
  // The speech pipeline's orchestrators (null: none), and the models served:
  // for the Batch API's speech lines.
  Orchestrators* orchestrators() const { return orchestrators_.get(); }
  const SpeechModels& models() const { return models_; }

 private:
  void Speech(std::shared_ptr<HttpExchange> exchange);
  void Voices(HttpExchange& exchange);

  const SpeechModels models_;
  RouteReplies* const replies_;
  const LoopPoster post_;
  const std::atomic<bool>* const draining_;
  // Null without a speech pipeline.
  std::unique_ptr<Orchestrators> orchestrators_;
  std::atomic<int> running_{0};
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_SPEECH_ROUTE_H_
