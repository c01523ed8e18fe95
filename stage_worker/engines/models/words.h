// Fixed English word lists for the text-producing simulated engines. Fixed in
// code, not loaded from a file, so output is the same on every replica.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_WORDS_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_WORDS_H_

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace omnistage {

// Parts of speech for the thinker's sentence grammar. All lower case.
absl::Span<const absl::string_view> Determiners();
absl::Span<const absl::string_view> Adjectives();
absl::Span<const absl::string_view> Nouns();
absl::Span<const absl::string_view> Verbs();  // third person singular: "sings"
absl::Span<const absl::string_view> Adverbs();
absl::Span<const absl::string_view> Prepositions();

// Every word above, in one list (sim_llm's token -> word mapping).
absl::Span<const absl::string_view> AllWords();

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_WORDS_H_
