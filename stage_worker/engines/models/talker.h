// talker: the text -> audio-code stage (TokenIds out), streaming.
//
// Parameter `codes` chooses what the codes are:
// - `phonemes` (the default): espeak-ng's phonemes of the text, sentence by
//   sentence as the text arrives, as phoneme codes (phoneme_codes.h) that the
//   vocoder's `sound: speech` speaks. Details in talker_phonemes.h. Parameter
//   `codes_per_step` (default 32): codes emitted per step at most. Parameter
//   `first_piece_words` (default 0: off), and a request's extra parameter of
//   that name: its first piece ends after that many words or a clause, so the
//   first audio need not wait for a whole sentence.
// - `hashed`: the simulated model the multi-process tests are calibrated on. It
//   starts as soon as streamed text arrives: each step consumes up to
//   `chars_per_step` bytes of the input available so far and emits
//   `codes_per_char` codes per byte, each in [0, codebook_size), computed from
//   the byte, its position in the whole input and the request's seed (so
//   chunking never changes the codes). Text is consumed as UTF-8 bytes, which
//   keeps a multi-byte character split across chunks harmless. Parameters
//   `chars_per_step` (default 4), `codes_per_char` (default 2), `codebook_size`
//   (default 1024).
//
// Either way it finishes with FINISH_REASON_STOP when the input is complete and
// consumed (in the step that emits the last codes, or with an empty output when
// `last` came later), or FINISH_REASON_LENGTH once max_tokens codes were
// emitted. LENGTH wins when both hold, so the reason does not depend on when
// `last` arrived. Creating a `phonemes` talker fails with FAILED_PRECONDITION
// when espeak-ng cannot start (its data is missing).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_TALKER_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_TALKER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

inline constexpr char kTalkerEngineName[] = "talker";

absl::StatusOr<std::unique_ptr<Engine>> CreateTalkerEngine(
    const std::map<std::string, std::string>& params);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_TALKER_H_
