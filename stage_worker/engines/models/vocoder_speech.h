// The speaking vocoder's requests (vocoder parameter `sound: speech`, the
// default): streamed phoneme codes (phoneme_codes.h) in, espeak-ng's speech out
// as 16-bit mono PCM at `sample_rate_hz`, clause by clause as the codes arrive.
//
// - A clause is the codes up to and including a clause end, or
//   kMaxClauseCodes codes without one, or what is left when the input is
//   complete or max_tokens codes have arrived.
// - A step with no audio waiting takes the next whole clause, if there is one,
//   and speaks it: its codes written back as phonemes (PhonemeText()), given to
//   espeak-ng as "[[phonemes]]" followed by the clause's punctuation ('.' when it
//   has no clause end), which sets its intonation. espeak-ng's 22050 Hz samples
//   are resampled to `sample_rate_hz` (Resample()). Every clause but the first
//   starts with the silence espeak-ng puts after the previous clause's
//   punctuation (Espeak::PauseAfter()), since each clause is spoken on its own.
//   A clause without phonemes makes no sound; codes outside the inventory are
//   skipped.
// - Every step emits up to kChunkMs of the audio waiting as one AudioChunk.
// - The request's extra parameter `voice` (an espeak-ng variant of "en": m1..m8,
//   f1..f5, croak, ...) speaks it in that voice; absent, in espeak's default.
//   Its extra parameter `speed` (kMinSpeed to kMaxSpeed, default 1) speaks it
//   that many times faster: espeak-ng's rate (175 words a minute) times it,
//   and the pauses between clauses divided by it.
//
// The audio depends only on the codes (Espeak::Speak() is deterministic), so
// chunking never changes it. Finishes with FINISH_REASON_STOP once the input is
// complete and all of its audio is out, FINISH_REASON_LENGTH once max_tokens
// codes were taken and spoken (LENGTH wins when both hold), or
// FINISH_REASON_ERROR when espeak-ng fails.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_VOCODER_SPEECH_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_VOCODER_SPEECH_H_

#include <cstddef>
#include <memory>
#include <string>

#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/speech/espeak.h"

namespace omnistage {

inline constexpr size_t kMaxClauseCodes = 4096;
inline constexpr int kChunkMs = 500;

// The range of `speed`: espeak-ng's rates (Espeak::kMinWordsPerMinute to
// kMaxWordsPerMinute) over its default.
inline constexpr double kMinSpeed = 0.5;
inline constexpr double kMaxSpeed = 2.5;

// How a request is spoken.
struct SpeechVoice {
  // One of espeak's variants() (m3, f2, croak, ...); "" for its default voice.
  std::string variant;
  double speed = 1.0;
};

// A request's extra parameters `voice` and `speed`. A voice that is not one of
// espeak's variants() (an empty one too), or a speed out of range, is recorded
// in `extra` as an error naming the key.
SpeechVoice ReadSpeechVoice(EngineParams* extra, const Espeak& espeak);

// The generator of one request, speaking as `voice` says; `espeak` outlives it.
std::unique_ptr<RequestGenerator> NewSpeechVocoderRequest(Espeak* espeak, int sample_rate_hz,
                                                          SpeechVoice voice,
                                                          const RequestSettings& settings);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_VOCODER_SPEECH_H_
