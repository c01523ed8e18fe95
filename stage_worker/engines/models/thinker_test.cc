#include "stage_worker/engines/models/thinker.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::MakeRequest;
using engine_testing::RunToCompletion;
using ::testing::HasSubstr;

std::unique_ptr<Engine> MustCreate(const std::map<std::string, std::string>& params = {}) {
  return engine_testing::MustCreate(kThinkerEngineName, params);
}

Collected Think(const std::string& prompt, uint64_t seed = 0, uint32_t max_tokens = 200,
                std::map<std::string, std::string> extra = {}) {
  std::unique_ptr<Engine> engine = MustCreate();
  EngineRequest request = MakeRequest("r", {TextPayload(prompt)}, true, max_tokens, seed);
  request.params.mutable_extra()->insert(extra.begin(), extra.end());
  EXPECT_TRUE(engine->Validate(request).ok());
  EXPECT_TRUE(engine->Add(std::move(request)).ok());
  return RunToCompletion(engine.get())["r"];
}

TEST(ThinkerTest, WritesSentencesOneWordPerStep) {
  Collected out = Think("Tell me about rivers.");
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_STOP);
  std::vector<std::string> words = absl::StrSplit(out.text, ' ');
  EXPECT_EQ(out.outputs, static_cast<int>(words.size()));
  EXPECT_TRUE(absl::ascii_isupper(out.text[0])) << out.text;
  EXPECT_TRUE(absl::EndsWith(out.text, ".")) << out.text;
  // Two sentences by default.
  EXPECT_EQ(std::count(out.text.begin(), out.text.end(), '.'), 2) << out.text;
  for (const std::string& word : words) {
    for (char c : word) EXPECT_TRUE(absl::ascii_isalpha(c) || c == '.') << word;
  }
}

// "An ancient engine", never "A ancient engine": the article agrees with the
// word after it, at a sentence's start and inside it.
TEST(ThinkerTest, ArticleAgreesWithTheNextWord) {
  int an = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    const std::string text = Think("articles", seed, 1000, {{"sentences", "20"}}).text;
    const std::vector<std::string> words = absl::StrSplit(text, ' ');
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      const std::string article = absl::AsciiStrToLower(words[i]);
      if (article != "a" && article != "an") continue;
      const bool vowel = absl::StrContains("aeiou", words[i + 1][0]);
      EXPECT_EQ(article, vowel ? "an" : "a") << words[i] << " " << words[i + 1] << " in " << text;
      an += article == "an";
    }
  }
  EXPECT_GT(an, 0) << "no noun phrase started with a vowel: the test shows nothing";
}

TEST(ThinkerTest, DeterministicPerPromptAndSeed) {
  EXPECT_EQ(Think("hello").text, Think("hello").text);
  EXPECT_NE(Think("hello").text, Think("goodbye").text);
  EXPECT_NE(Think("hello").text, Think("hello", /*seed=*/1).text);
}

TEST(ThinkerTest, StopsAtMaxTokens) {
  Collected out = Think("hello", 0, /*max_tokens=*/2);
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(out.outputs, 2);
}

TEST(ThinkerTest, SentencesExtraParameter) {
  Collected out = Think("hello", 0, 1000, {{"sentences", "5"}});
  EXPECT_EQ(std::count(out.text.begin(), out.text.end(), '.'), 5) << out.text;

  std::unique_ptr<Engine> engine = MustCreate();
  EngineRequest request = MakeRequest("r", {TextPayload("x")});
  (*request.params.mutable_extra())["sentences"] = "many";
  EXPECT_THAT(std::string(engine->Validate(request).message()),
              HasSubstr("extra parameter sentences: expected an integer in [1, 100]"));
  request.params.mutable_extra()->clear();
  (*request.params.mutable_extra())["tone"] = "happy";
  EXPECT_EQ(engine->Validate(request).message(),
            "engine thinker: unknown extra parameter 'tone' (known: later_piece_steps, sentences)");
}

TEST(ThinkerTest, WaitsForCompletePrompt) {
  std::unique_ptr<Engine> engine = MustCreate();
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TextPayload("hel")}, false)).ok());
  EXPECT_FALSE(engine->HasWork());
  ASSERT_TRUE(engine->AppendInput("r", {TextPayload("lo")}, true).ok());
  EXPECT_EQ(RunToCompletion(engine.get())["r"].text, Think("hello", 0, 32).text);
}

TEST(ThinkerTest, RejectsTokenInputAndBadParameters) {
  std::unique_ptr<Engine> engine = MustCreate();
  EXPECT_THAT(std::string(engine->Validate(MakeRequest("r", {TokensPayload({1})})).message()),
              HasSubstr("input payload 0 is tokens, but this engine accepts text"));
  EXPECT_FALSE(CreateThinkerEngine({{"sentences", "0"}}).ok());
}

}  // namespace
}  // namespace omnistage
