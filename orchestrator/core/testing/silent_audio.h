// SilentAudio: an audio payload of silence that plays `seconds`, for tests
// that count what a listener got.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_TESTING_SILENT_AUDIO_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_TESTING_SILENT_AUDIO_H_

#include <cstddef>
#include <string>

#include "protos/common.pb.h"

namespace omnistage {

// 16-bit mono PCM at `sample_rate_hz` (a low rate keeps long audio small).
inline v1::Payload SilentAudio(double seconds, int sample_rate_hz = 24000) {
  v1::Payload p;
  p.mutable_audio()->set_pcm_s16le(
      std::string(static_cast<size_t>(seconds * sample_rate_hz) * 2, '\0'));
  p.mutable_audio()->set_sample_rate_hz(sample_rate_hz);
  return p;
}

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_TESTING_SILENT_AUDIO_H_
