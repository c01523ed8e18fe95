// ResampleMono: 16-bit mono audio held whole in memory, at another rate, by
// libsoxr (Debian's libsoxr, "high quality": 20-bit precision, linear phase,
// its passband to 91% of the lower rate's Nyquist frequency and nothing above
// it let through to alias). The gateway resamples an uploaded file to the rate
// its recogniser hears before the audio goes to the pipeline, so a file's own
// rate neither costs the pipeline bytes nor reaches the recogniser unfiltered.
//
//   absl::StatusOr<std::vector<int16_t>> at_16k = ResampleMono(samples, 44100, 16000);
//
// Thread-safe (each call makes its own resampler).
#ifndef OMNISTAGE_GATEWAY_AUDIO_AUDIO_RESAMPLER_H_
#define OMNISTAGE_GATEWAY_AUDIO_AUDIO_RESAMPLER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace omnistage {

// `samples` at `from_hz` as samples at `to_hz` (the same samples when the
// rates are equal). INVALID_ARGUMENT for a rate that is not positive;
// INTERNAL with libsoxr's message when it fails.
absl::StatusOr<std::vector<int16_t>> ResampleMono(absl::Span<const int16_t> samples, int from_hz,
                                                  int to_hz);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_AUDIO_RESAMPLER_H_
