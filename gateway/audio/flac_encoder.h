// FlacEncoder: the "flac" response format, with libFLAC's stream encoder
// (compression level 5, blocks of 4,096 samples: each block goes out once it
// is full). A stream cannot go back to fill in STREAMINFO's sample count and
// checksum, so those stay unknown (0), as FLAC allows: a player finds the
// length by decoding.
#ifndef OMNISTAGE_GATEWAY_AUDIO_FLAC_ENCODER_H_
#define OMNISTAGE_GATEWAY_AUDIO_FLAC_ENCODER_H_

#include <memory>
#include <string>
#include <vector>

#include "FLAC/stream_encoder.h"
#include "gateway/audio/audio_encoder.h"

namespace omnistage {

class FlacEncoder : public AudioEncoder {
 public:
  // INTERNAL when libFLAC refuses the rate.
  static absl::StatusOr<std::unique_ptr<FlacEncoder>> Create(int sample_rate_hz);
  ~FlacEncoder() override;
  FlacEncoder(const FlacEncoder&) = delete;
  FlacEncoder& operator=(const FlacEncoder&) = delete;

  absl::Status Encode(absl::Span<const int16_t> samples, std::string* out) override;
  absl::Status Finish(std::string* out) override;
  const char* content_type() const override { return "audio/flac"; }

  // libFLAC's write callback: appends to the current output.
  void Write(const unsigned char* data, size_t bytes) {
    out_->append(reinterpret_cast<const char*>(data), bytes);
  }

 private:
  FlacEncoder();

  FLAC__StreamEncoder* encoder_;
  // Where Write() appends, for the duration of one call into libFLAC.
  std::string* out_ = nullptr;
  std::string pending_;  // written before the first Encode (the header)
  std::vector<int32_t> widened_;
  bool finished_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_FLAC_ENCODER_H_
