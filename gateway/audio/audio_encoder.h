// AudioEncoder: 16-bit mono PCM in, one of the response formats of
// /v1/audio/speech out (docs/openai.md, "Speech"), as a stream: each encoder
// hands out bytes as soon as its format allows (a frame, an Ogg page), so the
// first audio leaves before the last is made, and Finish() flushes the rest.
//
//   absl::StatusOr<std::unique_ptr<AudioEncoder>> encoder = MakeAudioEncoder("mp3", 24000);
//   std::string out;
//   (*encoder)->Encode(samples, &out);   // out may stay empty for a while
//   (*encoder)->Finish(&out);            // the last frames, trailers
//
// Not thread-safe: one encoder per response.
#ifndef OMNISTAGE_GATEWAY_AUDIO_AUDIO_ENCODER_H_
#define OMNISTAGE_GATEWAY_AUDIO_AUDIO_ENCODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace omnistage {

class AudioEncoder {
 public:
  virtual ~AudioEncoder() = default;

  // Appends the encoding of `samples` (mono, at the rate the encoder was made
  // for) to `*out`; that may be nothing until a frame is full.
  virtual absl::Status Encode(absl::Span<const int16_t> samples, std::string* out) = 0;
  // The end of the audio: appends what is left (the last frames, trailers).
  // Nothing may be encoded after it.
  virtual absl::Status Finish(std::string* out) = 0;
  // The HTTP Content-Type of what it makes.
  virtual const char* content_type() const = 0;
};

// The response formats served, in the order error messages list them.
const std::vector<std::string>& ServedAudioFormats();

// An encoder for `format` ("mp3", "opus", "flac", "wav", "pcm") of mono audio
// at `sample_rate_hz`. INVALID_ARGUMENT naming the served formats for any other
// (OpenAI's "aac" included: no AAC encoder is packaged that fits); INTERNAL if
// the library refuses the rate.
absl::StatusOr<std::unique_ptr<AudioEncoder>> MakeAudioEncoder(absl::string_view format,
                                                               int sample_rate_hz);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_AUDIO_ENCODER_H_
