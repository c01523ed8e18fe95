// SpeechCall: one /v1/audio/speech request in flight — the speech pipeline's
// Generate stream (gRPC callback API) feeding one HTTP exchange through an
// AudioEncoder, so the first audio leaves before the last sentence is spoken.
//
// The response starts at the first audio (200, the format's Content-Type, or
// text/event-stream for stream_format "sse"), so a request the pipeline
// refuses before any audio (an unknown voice, a speed the vocoder cannot
// speak) is still its own 4xx in OpenAI's shape, naming the field. Audio is
// encoded as it arrives and the next response is read only once the client's
// socket took the last bytes (a slow client slows its own stream); a client
// that goes away cancels the call, which aborts the request on every stage.
// A stream that breaks after its start ends there: for "sse" with an error
// event; the raw audio is shorter than the text (the gateway's log says why).
#ifndef OMNISTAGE_GATEWAY_SPEECH_SPEECH_CALL_H_
#define OMNISTAGE_GATEWAY_SPEECH_SPEECH_CALL_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/playback_model.h"
#include "gateway/audio/audio_encoder.h"
#include "gateway/chat/chat_call.h"
#include "gateway/chat/response_reader.h"
#include "gateway/http/api_error.h"
#include "gateway/http/http_reply.h"
#include "gateway/http/trace_headers.h"
#include "gateway/speech/speech_request.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class SpeechCall final : public ResponseReader<grpc::ClientReadReactor<v1::GenerateResponse>> {
 public:
  // Starts the call; it deletes itself once it ended. Loop thread.
  // `voice_stage`: the pipeline's stage that speaks, whose refusals of its
  // extra parameters name the request's voice and speed.
  static void Start(v1::Orchestrator::Stub* stub, CallFallback fallback, bool orchestrator_tls,
                    SpeechRequest request, int voice_stage, std::string authorization,
                    TraceHeaders trace, std::shared_ptr<HttpReply> exchange, LoopPoster post,
                    CallObserver observer);

 private:
  SpeechCall(SpeechRequest request, int voice_stage, std::string authorization, TraceHeaders trace,
             std::shared_ptr<HttpReply> exchange, LoopPoster post, CallObserver observer,
             CallFallback fallback);
  void Begin(v1::Orchestrator::Stub* stub);
  // ResponseReader (loop thread).
  void Deliver(const v1::GenerateResponse& response) override;
  void Ended(const grpc::Status& status) override;
  void Retry(v1::Orchestrator::Stub* stub) override;

  // Encodes the audio of `response` into `*out` (for "sse", as delta events);
  // an error when the audio cannot be encoded.
  absl::Status Encode(const v1::GenerateResponse& response, std::string* out);
  // The bytes (or event) that end a stream: the encoder's last frames, and for
  // "sse" the done event.
  absl::Status Flush(std::string* out);
  // `encoded` as the stream carries it: itself, or an "sse" delta event.
  std::string Framed(const std::string& encoded) const;
  // The error a refusal of the pipeline is answered with, naming the field.
  ApiError TerminalError(const v1::Terminal& terminal) const;
  void AnswerError(const ApiError& error, const char* outcome);
  // Ends a stream that started and broke, saying why where the format can.
  void Break(const std::string& why);
  void Finish(int http_status, std::string outcome, std::string error = "");

  const SpeechRequest request_;
  const int voice_stage_;
  const std::string authorization_;
  const TraceHeaders trace_;
  bool orchestrator_tls_ = false;
  bool got_response_ = false;
  std::string request_id_;
  const std::shared_ptr<HttpReply> exchange_;
  const CallObserver observer_;
  // Made at the first audio, at its rate.
  std::unique_ptr<AudioEncoder> encoder_;
  int sample_rate_hz_ = 0;
  // Samples spoken, for the usage and the log.
  int64_t samples_ = 0;
  // The audio as the client got it, and the seconds of it held to go with
  // the end.
  const absl::Time started_ = absl::Now();
  PlaybackModel player_;
  double held_audio_seconds_ = 0;
  v1::Terminal terminal_;
  bool got_terminal_ = false;
  // Encoded with the terminal's response: written with the end.
  std::string held_;
  // Why the audio could not be encoded (the call was cancelled for it).
  absl::Status broken_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_SPEECH_SPEECH_CALL_H_
