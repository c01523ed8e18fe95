// PcmEncoder: the "pcm" response format, raw 16-bit little-endian mono samples
// with no header (OpenAI's: at 24 kHz), passed on as they come.
#ifndef OMNISTAGE_GATEWAY_AUDIO_PCM_ENCODER_H_
#define OMNISTAGE_GATEWAY_AUDIO_PCM_ENCODER_H_

#include <string>

#include "gateway/audio/audio_encoder.h"

namespace omnistage {

class PcmEncoder : public AudioEncoder {
 public:
  absl::Status Encode(absl::Span<const int16_t> samples, std::string* out) override;
  absl::Status Finish(std::string* out) override { return absl::OkStatus(); }
  const char* content_type() const override { return "audio/pcm"; }
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_PCM_ENCODER_H_
