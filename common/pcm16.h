// 16-bit little-endian PCM (AudioChunk.pcm_s16le, the raw "pcm" format) to and
// from samples, the same on every host.
//
//   AppendPcmS16le(samples, chunk.mutable_pcm_s16le());
//   std::vector<int16_t> mono = MonoSamples(chunk.pcm_s16le(), chunk.channels());
//
// Thread-safe (no state).
#ifndef OMNISTAGE_COMMON_PCM16_H_
#define OMNISTAGE_COMMON_PCM16_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace omnistage {

// Appends `samples` as pcm_s16le bytes.
void AppendPcmS16le(absl::Span<const int16_t> samples, std::string* bytes);

// The samples of pcm_s16le bytes holding `channels` interleaved channels,
// mixed down to mono (each frame's mean, rounded toward zero). `bytes` holds
// whole frames: its size is a multiple of 2 * channels.
std::vector<int16_t> MonoSamples(absl::string_view bytes, int channels);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_PCM16_H_
