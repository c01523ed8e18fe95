#include "stage_worker/engines/models/thinker.h"

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "stage_worker/engines/base/batching_engine.h"
#include "stage_worker/engines/base/engine_params.h"
#include "stage_worker/engines/models/prng.h"
#include "stage_worker/engines/models/words.h"

namespace omnistage {
namespace {

constexpr int kDefaultSentences = 2;
constexpr int kMaxSentences = 100;

int ReadSentences(EngineParams* params, int default_value) {
  return static_cast<int>(params->Int("sentences", default_value, 1, kMaxSentences));
}

absl::string_view Pick(absl::Span<const absl::string_view> words, SplitMix64* rng) {
  return words[rng->Below(words.size())];
}

// One sentence: Det [Adj] Noun Verb [Adv] [Prep Det [Adj] Noun] — 3 to 9 words,
// capitalized, ending with ".".
std::vector<std::string> MakeSentence(SplitMix64* rng) {
  std::vector<std::string> words;
  auto add = [&](absl::Span<const absl::string_view> list) { words.emplace_back(Pick(list, rng)); };
  auto noun_phrase = [&] {
    const size_t determiner = words.size();
    add(Determiners());
    if (rng->Below(2) == 0) add(Adjectives());
    add(Nouns());
    // "an ancient engine", not "a ancient engine" (no word here starts with a
    // vowel letter yet a consonant sound, as "one" or "university" would).
    if (words[determiner] == "a" && absl::StrContains("aeiou", words[determiner + 1][0])) {
      words[determiner] = "an";
    }
  };
  noun_phrase();
  add(Verbs());
  if (rng->Below(3) == 0) add(Adverbs());
  if (rng->Below(3) != 0) {
    add(Prepositions());
    noun_phrase();
  }
  words.front()[0] = absl::ascii_toupper(words.front()[0]);
  words.back() += ".";
  return words;
}

class ThinkerGenerator : public RequestGenerator {
 public:
  ThinkerGenerator(int sentences, const RequestSettings& settings)
      : sentences_(sentences), max_tokens_(settings.max_tokens), seed_(settings.seed) {}

  bool Ready(const RequestInput& input) const override { return input.complete; }

  GeneratedStep Step(const RequestInput& input) override {
    if (!planned_) Plan(input.text);
    GeneratedStep step;
    step.payloads.push_back(TextPayload(absl::StrCat(next_ == 0 ? "" : " ", reply_[next_])));
    ++next_;
    if (next_ == reply_.size()) {
      step.finish_reason = truncated_ ? v1::FINISH_REASON_LENGTH : v1::FINISH_REASON_STOP;
    }
    return step;
  }

 private:
  // Writes the whole reply up front (at most max_tokens words): cheap, and it
  // makes "is this the last word?" a plain comparison.
  void Plan(const std::string& prompt) {
    planned_ = true;
    SplitMix64 rng(HashCombine(HashBytes(prompt), seed_));
    for (int s = 0; s < sentences_ && !truncated_; ++s) {
      for (std::string& word : MakeSentence(&rng)) {
        if (reply_.size() == max_tokens_) {
          truncated_ = true;
          break;
        }
        reply_.push_back(std::move(word));
      }
    }
  }

  const int sentences_;
  const uint32_t max_tokens_;
  const uint64_t seed_;
  bool planned_ = false;
  bool truncated_ = false;  // max_tokens cut the paragraph short
  std::vector<std::string> reply_;
  size_t next_ = 0;  // index in reply_ of the next word to emit
};

class ThinkerEngine : public BatchingEngine {
 public:
  ThinkerEngine(BatchingOptions batching, int sentences)
      : BatchingEngine(kThinkerEngineName, {v1::Payload::kText}, batching), sentences_(sentences) {}

 protected:
  std::unique_ptr<RequestGenerator> NewGenerator(const RequestSettings& settings) const override {
    // Validate() already accepted these extras, so reading them cannot fail.
    EngineParams extra(kThinkerEngineName, settings.extra, "extra parameter");
    return std::make_unique<ThinkerGenerator>(ReadSentences(&extra, sentences_), settings);
  }

  void ReadExtra(EngineParams* extra) const override { ReadSentences(extra, sentences_); }

 private:
  const int sentences_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateThinkerEngine(
    const std::map<std::string, std::string>& params) {
  EngineParams reader(kThinkerEngineName, params);
  BatchingOptions batching = BatchingOptions::Read(&reader);
  const int sentences = ReadSentences(&reader, kDefaultSentences);
  absl::Status status = reader.Finish();
  if (!status.ok()) return status;
  return std::make_unique<ThinkerEngine>(batching, sentences);
}

}  // namespace omnistage
