#include "gateway/audio/wav_stream_encoder.h"

#include <cstdint>

#include "gateway/audio/pcm_encoder.h"

namespace omnistage {
namespace {

void AppendLe(uint32_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

void WavStreamEncoder::Header(std::string* out) {
  constexpr uint32_t kUnknown = 0xFFFFFFFF;
  const uint32_t rate = static_cast<uint32_t>(sample_rate_hz_);
  out->append("RIFF");
  AppendLe(kUnknown, 4, out);
  out->append("WAVEfmt ");
  AppendLe(16, 4, out);        // fmt chunk size
  AppendLe(1, 2, out);         // PCM
  AppendLe(1, 2, out);         // mono
  AppendLe(rate, 4, out);      // sample rate
  AppendLe(rate * 2, 4, out);  // bytes per second
  AppendLe(2, 2, out);         // block align
  AppendLe(16, 2, out);        // bits per sample
  out->append("data");
  AppendLe(kUnknown, 4, out);
  header_sent_ = true;
}

absl::Status WavStreamEncoder::Encode(absl::Span<const int16_t> samples, std::string* out) {
  if (!header_sent_) Header(out);
  AppendPcm16(samples, out);
  return absl::OkStatus();
}

absl::Status WavStreamEncoder::Finish(std::string* out) {
  if (!header_sent_) Header(out);  // No audio at all: still a WAV stream.
  return absl::OkStatus();
}

}  // namespace omnistage
