#include "gateway/audio/audio_resampler.h"

#include <soxr.h>

#include <cmath>

#include "absl/strings/str_cat.h"

namespace omnistage {

absl::StatusOr<std::vector<int16_t>> ResampleMono(absl::Span<const int16_t> samples, int from_hz,
                                                  int to_hz) {
  if (from_hz <= 0 || to_hz <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("resampling from ", from_hz, " Hz to ", to_hz, " Hz: rates must be positive"));
  }
  if (from_hz == to_hz) return std::vector<int16_t>(samples.begin(), samples.end());
  const double ratio = static_cast<double>(to_hz) / from_hz;
  // What soxr may write: the exact length, and a sample's rounding either way.
  std::vector<int16_t> out(static_cast<size_t>(std::ceil(samples.size() * ratio)) + 1);
  // No dither: soxr would add random noise to 16-bit output, and the same
  // upload must sound the same every time (a recogniser hears the difference).
  soxr_io_spec_t io = soxr_io_spec(SOXR_INT16_I, SOXR_INT16_I);
  io.flags |= SOXR_NO_DITHER;
  const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  size_t written = 0;
  const soxr_error_t error =
      soxr_oneshot(from_hz, to_hz, 1, samples.data(), samples.size(), nullptr, out.data(),
                   out.size(), &written, &io, &quality, nullptr);
  if (error != nullptr) {
    return absl::InternalError(absl::StrCat("libsoxr could not resample from ", from_hz,
                                            " Hz to ", to_hz, " Hz: ", error));
  }
  out.resize(written);
  return out;
}

}  // namespace omnistage
