// Phoneme codes: the speaking talker's tokens, and what the speaking vocoder
// turns back into speech. One code is one of
//
//   0, 1, 2   the end of a sentence: '.', '?', '!'
//   3         the end of a clause within a sentence (spoken as after ',')
//   4         a word break
//   5 ...     a phoneme of espeak-ng's English, by its ASCII mnemonic: the
//             names of espeak-ng 1.51's phoneme table "en" and the tables it
//             includes, in table order, stress marks and pauses among them
//
// A clause end carries its punctuation because espeak-ng gives it both the
// clause's intonation (a question rises) and the pause after it. The inventory
// is fixed here, not read from espeak-ng's data, so a code means the same on
// every replica and to every reader.
//
//   std::vector<int32_t> codes;
//   AppendPhonemeCodes("h\x1f@\x1fl\x1f'oU", &codes);  // h @ l ' oU (5 codes)
//   codes.push_back(ClauseEndCode('.'));
//   PhonemeText(codes) == "h@l'oU"
//
// Thread-safe (no state but constants).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_PHONEME_CODES_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_PHONEME_CODES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace omnistage {

// Espeak::Phonemes()'s separator for AppendPhonemeCodes(): the ASCII unit
// separator, which no phoneme name contains.
inline constexpr char kPhonemeSeparator = '\x1f';

inline constexpr int32_t kWordBreakCode = 4;

// Every code lies in [0, PhonemeCodeCount()).
int32_t PhonemeCodeCount();

// The clause-end code for `punctuation`: a sentence end for '.', '?', '!'; the
// within-a-sentence code for anything else.
int32_t ClauseEndCode(char punctuation);
bool IsClauseEnd(int32_t code);
// '.', '?', '!' or ',' for a clause-end code.
char ClauseEndPunctuation(int32_t code);

// Appends the codes of one clause, written as Espeak::Phonemes(text,
// kPhonemeSeparator) writes a clause. A stress mark or a length mark written
// together with a phoneme is a code of its own. A language switch such as
// "(fr)" and characters that begin no known name are skipped.
void AppendPhonemeCodes(absl::string_view clause, std::vector<int32_t>* codes);

// The phonemes `codes` stand for, written as espeak-ng writes them without a
// separator (the same text as Espeak::Phonemes() gives), so espeak-ng reads
// them back as phoneme input ("[[...]]"). Clause ends and codes outside the
// inventory add nothing.
std::string PhonemeText(absl::Span<const int32_t> codes);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_PHONEME_CODES_H_
