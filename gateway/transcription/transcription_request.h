// TranscriptionRequest: an OpenAI transcription upload (POST
// /v1/audio/transcriptions, multipart/form-data) read into what the gateway
// runs (docs/openai.md, "Transcriptions"):
//   file                      required: the audio file, at most kMaxUploadBytes
//                             (413 past it); decoded later (audio_decoder.h)
//   model                     one of the transcription models the gateway
//                             serves (404 otherwise)
//   response_format           json (default), text, verbose_json, srt or vtt
//   stream                    "true": transcript.text.delta events as the
//                             recogniser hears each utterance, then
//                             transcript.text.done (json and text only)
//   timestamp_granularities[] segment (default) and/or word: word adds the
//                             words with their times (verbose_json only)
//   language                  empty or "en": the recogniser hears English
//   prompt, temperature, include[], chunking_strategy: accepted, not used (a
//                             temperature outside 0..1 is still a 400)
// Unknown fields are ignored; a known field of the wrong value is a 400 naming
// it, in OpenAI's shape.
#ifndef OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPTION_REQUEST_H_
#define OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPTION_REQUEST_H_

#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "gateway/http/api_error.h"

namespace omnistage {

// The largest file an upload may carry (OpenAI's 25 MB).
inline constexpr size_t kMaxUploadBytes = 25 << 20;

struct TranscriptionRequest {
  std::string model;
  std::string file;      // the file's bytes
  std::string filename;  // as the client named it, for the log
  // json, text, verbose_json, srt or vtt.
  std::string format = "json";
  bool stream = false;
  bool words = false;  // timestamp_granularities includes "word"
};

// The request, or the error to answer with. `models`: the names `model` may
// take.
std::variant<TranscriptionRequest, ApiError> ParseTranscriptionRequest(
    absl::string_view content_type, std::string body, const std::vector<std::string>& models);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPTION_REQUEST_H_
