// OpusEncoder: the "opus" response format, Opus in an Ogg stream, with
// libopusenc (over libopus): mono at 32 kbit/s from the stage's rate (the
// library resamples to Opus's 48 kHz). Pages go out every 100 ms of audio at
// most (its muxing and decision delays lowered from their one and two seconds,
// for a stream), and at the end.
#ifndef OMNISTAGE_GATEWAY_AUDIO_OPUS_ENCODER_H_
#define OMNISTAGE_GATEWAY_AUDIO_OPUS_ENCODER_H_

#include <memory>
#include <string>

#include "gateway/audio/audio_encoder.h"

struct OggOpusEnc;
struct OggOpusComments;

namespace omnistage {

class OpusEncoder : public AudioEncoder {
 public:
  // INTERNAL when libopusenc refuses the rate.
  static absl::StatusOr<std::unique_ptr<OpusEncoder>> Create(int sample_rate_hz);
  ~OpusEncoder() override;
  OpusEncoder(const OpusEncoder&) = delete;
  OpusEncoder& operator=(const OpusEncoder&) = delete;

  absl::Status Encode(absl::Span<const int16_t> samples, std::string* out) override;
  absl::Status Finish(std::string* out) override;
  const char* content_type() const override { return "audio/ogg"; }

 private:
  OpusEncoder(OggOpusComments* comments, OggOpusEnc* encoder)
      : comments_(comments), encoder_(encoder) {}
  // Appends every page ready (all of them, with `flush`).
  void TakePages(bool flush, std::string* out);

  OggOpusComments* const comments_;
  OggOpusEnc* const encoder_;
  bool finished_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_OPUS_ENCODER_H_
