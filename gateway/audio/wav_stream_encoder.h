// WavStreamEncoder: the "wav" response format as a stream. A WAV file's header
// states the data's length, which a stream does not know when it starts: the
// header goes out first with the largest lengths the format holds
// (common/wav_writer.h's WavHeader for an unknown length), as streaming
// servers send it, and decoders read the samples to the stream's end.
#ifndef OMNISTAGE_GATEWAY_AUDIO_WAV_STREAM_ENCODER_H_
#define OMNISTAGE_GATEWAY_AUDIO_WAV_STREAM_ENCODER_H_

#include <string>

#include "gateway/audio/audio_encoder.h"

namespace omnistage {

class WavStreamEncoder : public AudioEncoder {
 public:
  explicit WavStreamEncoder(int sample_rate_hz) : sample_rate_hz_(sample_rate_hz) {}

  absl::Status Encode(absl::Span<const int16_t> samples, std::string* out) override;
  absl::Status Finish(std::string* out) override;
  const char* content_type() const override { return "audio/wav"; }

 private:
  void Header(std::string* out);

  const int sample_rate_hz_;
  bool header_sent_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_WAV_STREAM_ENCODER_H_
