// The speaking talker's requests (talker parameter `codes: phonemes`, the
// default): streamed text in, phoneme codes (phoneme_codes.h) out, sentence by
// sentence as the text arrives.
//
// - A sentence ends after '.', '!' or '?' followed by white space, at the end of
//   complete input, or, in a run of more than kMaxSentenceBytes without one, at
//   the last white space within it. These rules read only the text, so how the
//   text was chunked never moves a sentence end (which is why a final '.' waits
//   for the next chunk's space, or for the input to complete).
// - The first piece (`first_piece_words` > 0: the talker parameter, or the
//   request's extra parameter of that name): a request's first piece ends at
//   its first sentence end, clause end (',', ';' or ':' followed by white
//   space) or the white space after that many words, whichever comes first;
//   the rest goes sentence by sentence. So the first audio waits for a few
//   words, not a whole sentence. The same reading-only-the-text rules: the
//   chunking never moves where it ends.
// - Each sentence becomes espeak-ng's phonemes for it (Espeak::Phonemes()), clause
//   by clause: a clause's phoneme codes, then its clause end: the sentence's own
//   punctuation ('.' when it has none) after its last clause, the
//   within-a-sentence code after the others. A sentence without phonemes gives
//   no codes.
// - A step turns at most one more sentence into codes, when fewer than
//   `codes_per_step` are waiting, and emits up to `codes_per_step` codes.
//
// Finishes with FINISH_REASON_STOP once the input is complete and every code is
// out, or FINISH_REASON_LENGTH once max_tokens codes were emitted (LENGTH wins
// when both hold). Deterministic: the codes depend only on the text.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_TALKER_PHONEMES_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_TALKER_PHONEMES_H_

#include <cstddef>
#include <memory>

#include "absl/strings/string_view.h"
#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/speech/espeak.h"

namespace omnistage {

inline constexpr size_t kMaxSentenceBytes = 2000;

// The generator of one request; `espeak` outlives it.
std::unique_ptr<RequestGenerator> NewPhonemeTalkerRequest(Espeak* espeak, int codes_per_step,
                                                          int first_piece_words,
                                                          const RequestSettings& settings);

// The length of the sentence `text` starts with, by the rules above, where
// `complete` says no text follows; 0 while it has not ended.
size_t SentenceLength(absl::string_view text, bool complete);

// The length of the first piece `text` starts with (the first piece rule
// above, `words` > 0), and whether it ends a sentence; 0 while it has not
// ended.
struct TextPiece {
  size_t length = 0;
  bool ends_sentence = false;
};
TextPiece FirstPiece(absl::string_view text, bool complete, int words);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_TALKER_PHONEMES_H_
