// Word error rate: how far a recognizer's transcript is from the text that was
// spoken, for the listener's tests.
//
//   WordErrors errors = CountWordErrors("The cat sat.", "the cat sad");
//   // {.edits = 1, .reference_words = 3}; errors.rate() == 1/3
//
// Words are compared case-insensitively with their punctuation removed
// (apostrophes kept: "don't" is one word), as recognizers write them. The
// edits are the fewest substitutions, deletions and insertions that turn the
// reference's words into the hypothesis's (Levenshtein over words).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_WORD_ERROR_RATE_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_WORD_ERROR_RATE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace omnistage {

struct WordErrors {
  int edits = 0;
  int reference_words = 0;
  // edits / reference_words (0 for an empty reference and hypothesis; 1 per
  // word for an empty reference).
  double rate() const {
    return reference_words == 0 ? edits : static_cast<double>(edits) / reference_words;
  }
  WordErrors& operator+=(const WordErrors& other) {
    edits += other.edits;
    reference_words += other.reference_words;
    return *this;
  }
};

// `text`'s words: lowercase, punctuation other than apostrophes removed.
std::vector<std::string> NormalizedWords(absl::string_view text);

WordErrors CountWordErrors(absl::string_view reference, absl::string_view hypothesis);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_TESTING_WORD_ERROR_RATE_H_
