#include "stage_worker/engines/models/words.h"

#include <vector>

namespace omnistage {
namespace {

constexpr absl::string_view kDeterminers[] = {"the", "a", "every", "one", "that", "this"};

constexpr absl::string_view kAdjectives[] = {
    "quiet", "bright",  "small",  "ancient", "gentle", "curious", "silver", "hidden",
    "warm",  "distant", "golden", "patient", "swift",  "simple",  "open",   "careful",
    "green", "steady",  "clever", "old",     "new",    "calm",    "vast",   "tiny"};

constexpr absl::string_view kNouns[] = {
    "river",    "garden",  "engine",  "forest", "city",    "signal", "mountain", "window",
    "teacher",  "machine", "village", "bridge", "lantern", "story",  "ocean",    "model",
    "stage",    "network", "harbor",  "cloud",  "library", "path",   "song",     "field",
    "pipeline", "voice",   "map",     "letter", "island",  "clock",  "road",     "idea"};

constexpr absl::string_view kVerbs[] = {
    "sings",   "waits",   "listens", "travels", "grows",  "answers", "builds",  "remembers",
    "follows", "carries", "watches", "learns",  "speaks", "returns", "shines",  "turns",
    "finds",   "holds",   "opens",   "moves",   "rests",  "changes", "gathers", "explains"};

constexpr absl::string_view kAdverbs[] = {"softly", "slowly",  "quickly", "gladly", "always",
                                          "often",  "quietly", "easily",  "again",  "together"};

constexpr absl::string_view kPrepositions[] = {"near",   "beyond",  "under", "across", "with",
                                               "beside", "through", "above", "around", "toward"};

template <size_t N>
absl::Span<const absl::string_view> AsSpan(const absl::string_view (&words)[N]) {
  return absl::MakeConstSpan(words, N);
}

}  // namespace

absl::Span<const absl::string_view> Determiners() { return AsSpan(kDeterminers); }
absl::Span<const absl::string_view> Adjectives() { return AsSpan(kAdjectives); }
absl::Span<const absl::string_view> Nouns() { return AsSpan(kNouns); }
absl::Span<const absl::string_view> Verbs() { return AsSpan(kVerbs); }
absl::Span<const absl::string_view> Adverbs() { return AsSpan(kAdverbs); }
absl::Span<const absl::string_view> Prepositions() { return AsSpan(kPrepositions); }

absl::Span<const absl::string_view> AllWords() {
  // Built once, never destroyed (no exit-time destructor ordering issues).
  static const std::vector<absl::string_view>* const kAll = [] {
    auto* all = new std::vector<absl::string_view>();
    for (auto list : {Determiners(), Adjectives(), Nouns(), Verbs(), Adverbs(), Prepositions()}) {
      all->insert(all->end(), list.begin(), list.end());
    }
    return all;
  }();
  return *kAll;
}

}  // namespace omnistage
