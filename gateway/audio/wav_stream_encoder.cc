#include "gateway/audio/wav_stream_encoder.h"

#include "common/pcm16.h"
#include "common/wav_writer.h"

namespace omnistage {

absl::Status WavStreamEncoder::Encode(absl::Span<const int16_t> samples, std::string* out) {
  if (!header_sent_) Header(out);
  AppendPcmS16le(samples, out);
  return absl::OkStatus();
}

absl::Status WavStreamEncoder::Finish(std::string* out) {
  if (!header_sent_) Header(out);  // No audio at all: still a WAV stream.
  return absl::OkStatus();
}

void WavStreamEncoder::Header(std::string* out) {
  *out += WavHeader(sample_rate_hz_, /*channels=*/1, /*data_bytes=*/-1);
  header_sent_ = true;
}

}  // namespace omnistage
