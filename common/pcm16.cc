#include "common/pcm16.h"

namespace omnistage {

void AppendPcmS16le(absl::Span<const int16_t> samples, std::string* bytes) {
  bytes->reserve(bytes->size() + 2 * samples.size());
  for (int16_t sample : samples) {
    const auto bits = static_cast<uint16_t>(sample);
    bytes->push_back(static_cast<char>(bits & 0xff));
    bytes->push_back(static_cast<char>(bits >> 8));
  }
}

std::vector<int16_t> MonoSamples(absl::string_view bytes, int channels) {
  const size_t frames = bytes.size() / (2 * static_cast<size_t>(channels));
  std::vector<int16_t> samples(frames);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  for (size_t f = 0; f < frames; ++f) {
    int32_t sum = 0;
    for (int c = 0; c < channels; ++c) {
      const size_t at = 2 * (f * static_cast<size_t>(channels) + static_cast<size_t>(c));
      sum += static_cast<int16_t>(static_cast<uint16_t>(data[at] | (data[at + 1] << 8)));
    }
    samples[f] = static_cast<int16_t>(sum / channels);
  }
  return samples;
}

}  // namespace omnistage
