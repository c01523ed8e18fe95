// SpeechRequest: an OpenAI speech request body (POST /v1/audio/speech) read
// into the Generate request the speech pipeline runs (docs/openai.md,
// "Speech"):
//   model            one of the speech models the gateway serves (404 otherwise)
//   input            the text to speak as written, 1 to 4,096 characters: the
//                    pipeline's prompt
//   voice            required: the voice stage's extra parameter `voice`
//                    (VoiceVariant(): OpenAI's names become espeak-ng variants)
//   response_format  mp3 (default), opus, flac, wav or pcm; aac is a 400 that
//                    names the formats served
//   speed            0.25 to 4.0 (default 1): the voice stage's extra parameter
//                    `speed`, sent only when not 1 (the vocoder refuses what it
//                    cannot speak, naming `speed`)
//   stream_format    "audio" (default: the format's bytes as they are made) or
//                    "sse" (speech.audio.delta events, then speech.audio.done)
//   instructions     accepted and not used: these voices take no instructions
// Unknown fields are ignored; a known field of the wrong type or range is a 400
// naming it, in OpenAI's shape.
#ifndef OMNISTAGE_GATEWAY_SPEECH_SPEECH_REQUEST_H_
#define OMNISTAGE_GATEWAY_SPEECH_SPEECH_REQUEST_H_

#include <string>
#include <variant>
#include <vector>

#include "gateway/http/api_error.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// The most characters `input` may hold (OpenAI's limit).
inline constexpr size_t kMaxSpeechInputChars = 4096;

// What the gateway serves for speech.
struct SpeechModels {
  // The names `model` may take (e.g. tts-1, tts-1-hd, gpt-4o-mini-tts).
  std::vector<std::string> names;
  // The speech pipeline's stage that speaks (its vocoder): voice and speed go
  // there as its extra parameters.
  int voice_stage = 1;
};

struct SpeechRequest {
  v1::GenerateRequest generate;
  // One of ServedAudioFormats().
  std::string format = "mp3";
  bool sse = false;
  // As the client sent them, for errors that name them.
  std::string voice;
  double speed = 1.0;
};

// The request, or the error to answer with.
std::variant<SpeechRequest, ApiError> ParseSpeechRequest(const std::string& body,
                                                         const SpeechModels& models);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_SPEECH_SPEECH_REQUEST_H_
