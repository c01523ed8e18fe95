// 16-bit PCM helpers for the vocoders and the listener: rate conversion, and
// (common/pcm16.h) the little-endian bytes of an AudioChunk.
//
//   std::vector<int16_t> speech = Resample(espeak_samples, 22050, 24000);
//   AppendPcmS16le(speech, chunk.mutable_pcm_s16le());
//
// Thread-safe (no state).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_PCM_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_PCM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/pcm16.h"

namespace omnistage {

// `samples` at `from_hz`, converted to `to_hz` by linear interpolation, in
// integer arithmetic so every machine computes the same samples. Output sample
// j lies at input position j * from_hz / to_hz; there are
// floor(size * to_hz / from_hz) of them. No low-pass filter: meant for raising
// the rate (espeak-ng's 22050 Hz to 24 kHz), where none is needed.
std::vector<int16_t> Resample(absl::Span<const int16_t> samples, int from_hz, int to_hz);

// How many samples at `to_hz` last as long as `count` samples at `from_hz`
// (rounded down), as Resample() counts them.
int64_t ResampledCount(int64_t count, int from_hz, int to_hz);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_PCM_H_
