#include "gateway/audio/pcm_encoder.h"

namespace omnistage {

void AppendPcm16(absl::Span<const int16_t> samples, std::string* out) {
  const size_t at = out->size();
  out->resize(at + samples.size() * 2);
  for (size_t i = 0; i < samples.size(); ++i) {
    const uint16_t v = static_cast<uint16_t>(samples[i]);
    (*out)[at + 2 * i] = static_cast<char>(v & 0xff);
    (*out)[at + 2 * i + 1] = static_cast<char>(v >> 8);
  }
}

absl::Status PcmEncoder::Encode(absl::Span<const int16_t> samples, std::string* out) {
  AppendPcm16(samples, out);
  return absl::OkStatus();
}

}  // namespace omnistage
