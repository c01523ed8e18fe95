#include "stage_worker/engines/speech/pcm.h"

#include <algorithm>

namespace omnistage {

int64_t ResampledCount(int64_t count, int from_hz, int to_hz) { return count * to_hz / from_hz; }

std::vector<int16_t> Resample(absl::Span<const int16_t> samples, int from_hz, int to_hz) {
  const int64_t count = ResampledCount(static_cast<int64_t>(samples.size()), from_hz, to_hz);
  std::vector<int16_t> out;
  out.reserve(static_cast<size_t>(count));
  const int64_t last = static_cast<int64_t>(samples.size()) - 1;
  for (int64_t j = 0; j < count; ++j) {
    // Input position j * from_hz / to_hz = index + fraction / to_hz.
    const int64_t position = j * from_hz;
    const int64_t index = position / to_hz;
    const int64_t fraction = position % to_hz;
    const int64_t a = samples[index];
    const int64_t b = samples[std::min(index + 1, last)];
    const int64_t scaled = a * (to_hz - fraction) + b * fraction;
    // Rounded half away from zero; the result lies between a and b, so it fits.
    const int64_t half = to_hz / 2;
    out.push_back(
        static_cast<int16_t>(scaled >= 0 ? (scaled + half) / to_hz : -((-scaled + half) / to_hz)));
  }
  return out;
}

}  // namespace omnistage
