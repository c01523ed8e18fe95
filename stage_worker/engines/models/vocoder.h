// vocoder: the audio-code -> waveform stage (TokenIds in, 16-bit
// little-endian mono PCM AudioChunks at `sample_rate_hz`, default 24000, out),
// streaming.
//
// Parameter `sound` chooses what it makes of the codes:
// - `speech` (the default): reads them as phoneme codes (phoneme_codes.h, what
//   the talker's `codes: phonemes` makes) and speaks them with espeak-ng, clause
//   by clause as they arrive. Details in vocoder_speech.h.
// - `tones`: the simulated model the multi-process tests are calibrated on. It
//   starts as soon as streamed codes arrive: each step consumes up to
//   `codes_per_step` (default 8) available codes and emits one AudioChunk with
//   `ms_per_code` (default 40) ms of audio per code:
//   floor(sample_rate_hz * ms_per_code / 1000) samples. Each code is a soft tone
//   on a major pentatonic scale (so any code sequence sounds consonant), peaking
//   at 30% of full scale, with a raised-cosine fade in and out so codes join
//   without clicks. A code's samples depend only on the code, so chunking never
//   changes the audio.
//
// Either way it finishes with FINISH_REASON_STOP when the input is complete and
// consumed, or FINISH_REASON_LENGTH once max_tokens codes were consumed (LENGTH
// wins when both hold, as in the talker). Creating a `speech` vocoder fails with
// FAILED_PRECONDITION when espeak-ng cannot start (its data is missing).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_VOCODER_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_VOCODER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

inline constexpr char kVocoderEngineName[] = "vocoder";

absl::StatusOr<std::unique_ptr<Engine>> CreateVocoderEngine(
    const std::map<std::string, std::string>& params);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_VOCODER_H_
