// Mp3Encoder: the "mp3" response format (OpenAI's default), with LAME: MPEG
// layer III, mono, constant 64 kbit/s at the stage's rate (24 kHz is MPEG-2's),
// each frame out as soon as it is full. No Xing/LAME tag: it is written at the
// end, at the file's start, which a stream has already sent.
#ifndef OMNISTAGE_GATEWAY_AUDIO_MP3_ENCODER_H_
#define OMNISTAGE_GATEWAY_AUDIO_MP3_ENCODER_H_

#include <memory>
#include <string>
#include <vector>

#include "gateway/audio/audio_encoder.h"

struct lame_global_struct;

namespace omnistage {

class Mp3Encoder : public AudioEncoder {
 public:
  // INVALID_ARGUMENT for a rate MPEG audio has not (8 to 48 kHz, its nine).
  static absl::StatusOr<std::unique_ptr<Mp3Encoder>> Create(int sample_rate_hz);
  ~Mp3Encoder() override;
  Mp3Encoder(const Mp3Encoder&) = delete;
  Mp3Encoder& operator=(const Mp3Encoder&) = delete;

  absl::Status Encode(absl::Span<const int16_t> samples, std::string* out) override;
  absl::Status Finish(std::string* out) override;
  const char* content_type() const override { return "audio/mpeg"; }

 private:
  explicit Mp3Encoder(lame_global_struct* lame) : lame_(lame) {}

  lame_global_struct* const lame_;
  std::vector<unsigned char> buffer_;
  bool finished_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_MP3_ENCODER_H_
