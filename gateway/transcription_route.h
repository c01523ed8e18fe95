// TranscriptionRoute: the gateway's speech-to-text route (docs/openai.md,
// "Transcriptions"):
//   POST /v1/audio/transcriptions   an uploaded file's speech as text, in the
//                                   format asked (transcription/)
//
// The file is decoded (gateway/audio/audio_decoder.h) and resampled to the
// recogniser's rate (audio_resampler.h) on a thread of the route's own, one
// upload at a time, so a long file never holds the HTTP loop; then the
// listening pipeline hears it: one whose stage 0 is a speech recogniser
// (pipelines/local_listener.yaml), served by the orchestrators
// --transcription_orchestrator names. Without it the route answers 404,
// saying how to serve transcriptions.
//
// Loop thread only, but running().
#ifndef OMNISTAGE_GATEWAY_TRANSCRIPTION_ROUTE_H_
#define OMNISTAGE_GATEWAY_TRANSCRIPTION_ROUTE_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/liveness.h"
#include "gateway/http/http_server.h"
#include "gateway/orchestrators.h"
#include "gateway/route_replies.h"

namespace omnistage {

class TranscriptionRoute {
 public:
  struct Options {
    // The listening pipeline's orchestrators; an empty address serves none.
    Orchestrators::Target target;
    // The names `model` may take.
    std::vector<std::string> models;
    // The rate uploads are resampled to: the recogniser's.
    int sample_rate_hz = 16000;
    // The longest upload heard, in seconds.
    double max_seconds = 1500;
  };

  // `replies` and `fallbacks` are not owned and outlive the route. `draining`
  // is the gateway's: once set, requests get 503.
  TranscriptionRoute(Options options, RouteReplies* replies, LoopPoster post,
                     const std::atomic<bool>* draining, Counter* fallbacks);
  ~TranscriptionRoute();

  // A request to /v1/audio/transcriptions.
  void Handle(std::shared_ptr<HttpExchange> exchange);
  // Transcriptions running (decoding or heard). Thread-safe.
  int running() const { return running_.load(); }

 private:
  void Transcribe(std::shared_ptr<HttpExchange> exchange);

  const Options options_;
  RouteReplies* const replies_;
  const LoopPoster post_;
  const std::atomic<bool>* const draining_;
  // Null without a listening pipeline.
  std::unique_ptr<Orchestrators> orchestrators_;
  std::atomic<int> running_{0};
  Liveness alive_;
  // Decodes uploads, one at a time (last: it stops first).
  EventLoop decoding_;
  std::unique_ptr<LoopThread> decoder_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_TRANSCRIPTION_ROUTE_H_
