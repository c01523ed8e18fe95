// The talker's first piece (`first_piece_words`): a request's first audio
// waits for a few words or a clause, not its whole first sentence.
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/models/talker.h"
#include "stage_worker/engines/models/talker_phonemes.h"
#include "stage_worker/engines/speech/espeak.h"
#include "stage_worker/engines/speech/phoneme_codes.h"
#include "stage_worker/engines/testing/engine_harness.h"
#include "stage_worker/engines/testing/phoneme_clauses.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::MakeRequest;
using engine_testing::PhonemeClauses;
using engine_testing::RunToCompletion;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kText[] =
    "Tell me about the quiet river near the old bridge. It sings, softly; really! The end";

std::unique_ptr<Engine> MustCreate(const std::map<std::string, std::string>& params) {
  return engine_testing::MustCreate(kTalkerEngineName, params);
}

Collected OneShot(const std::map<std::string, std::string>& params,
                  const std::map<std::string, std::string>& extra = {}) {
  std::unique_ptr<Engine> engine = MustCreate(params);
  EngineRequest request = MakeRequest("r", {TextPayload(kText)}, true, 100000);
  for (const auto& [key, value] : extra) (*request.params.mutable_extra())[key] = value;
  EXPECT_TRUE(engine->Add(std::move(request)).ok());
  return RunToCompletion(engine.get())["r"];
}

std::string PhonemesOf(const std::string& text) {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  EXPECT_TRUE(espeak.ok()) << espeak.status();
  return espeak.ok() ? (*espeak)->Phonemes(text)[0] : "";
}

TEST(TalkerFirstPieceTest, EndsAtTheFirstOfWordsClauseOrSentence) {
  EXPECT_EQ(FirstPiece("Hello there my friend, how", false, 3).length, 14u);  // 3 words
  EXPECT_FALSE(FirstPiece("Hello there my friend, how", false, 3).ends_sentence);
  EXPECT_EQ(FirstPiece("Hi, there my friend", false, 3).length, 3u);  // a clause
  const TextPiece sentence = FirstPiece("Hi there. More words here", false, 5);
  EXPECT_EQ(sentence.length, 9u);
  EXPECT_TRUE(sentence.ends_sentence);
  // A word ends at the white space after it: until then it may go on.
  EXPECT_EQ(FirstPiece("one two three", false, 3).length, 0u);
  EXPECT_EQ(FirstPiece("one two three ", false, 3).length, 13u);
  EXPECT_EQ(FirstPiece("one  two", false, 2).length, 0u);  // two spaces: one word so far
  // The whole input, complete, is its one sentence.
  const TextPiece all = FirstPiece("Hello there", true, 3);
  EXPECT_EQ(all.length, 11u);
  EXPECT_TRUE(all.ends_sentence);
  EXPECT_EQ(FirstPiece("", false, 3).length, 0u);
}

// The first three words are spoken as they come; the rest of their sentence
// waits for its end, and goes on as a clause of it.
TEST(TalkerFirstPieceTest, SpeaksTheFirstWordsBeforeTheirSentenceEnds) {
  std::unique_ptr<Engine> engine = MustCreate({{"first_piece_words", "3"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false, 100000)).ok());
  ASSERT_TRUE(engine->AppendInput("r", {TextPayload("Tell me about")}, false).ok());
  EXPECT_FALSE(engine->HasWork());  // "about" may go on
  ASSERT_TRUE(engine->AppendInput("r", {TextPayload(" the river")}, false).ok());
  ASSERT_TRUE(engine->HasWork());
  std::map<std::string, Collected> out;
  engine_testing::Collect(*engine->Step(), &out);
  EXPECT_THAT(PhonemeClauses(out["r"].tokens),
              ElementsAre(std::pair(PhonemesOf("Tell me about"), ',')));
  EXPECT_FALSE(engine->HasWork());  // the rest waits for its sentence's end
  ASSERT_TRUE(engine->AppendInput("r", {TextPayload(" bank.")}, true).ok());
  const Collected rest = RunToCompletion(engine.get())["r"];
  EXPECT_THAT(PhonemeClauses(rest.tokens),
              ElementsAre(std::pair(PhonemesOf("the river bank."), '.')));
  EXPECT_EQ(rest.finish_reason, v1::FINISH_REASON_STOP);
}

// Where the first piece ends depends on the text alone: the codes are the
// same however it arrives (replay holds).
TEST(TalkerFirstPieceTest, ChunkingDoesNotMoveTheFirstPiece) {
  const std::map<std::string, std::string> params = {{"first_piece_words", "2"},
                                                     {"codes_per_step", "5"}};
  const Collected one_shot = OneShot(params);
  std::unique_ptr<Engine> engine = MustCreate(params);
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false, 100000)).ok());
  const std::string text = kText;
  std::map<std::string, Collected> out;
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(engine->AppendInput("r", {TextPayload(text.substr(i, 1))}, false).ok());
    if (i % 3 == 0 && engine->HasWork()) engine_testing::Collect(*engine->Step(), &out);
  }
  ASSERT_TRUE(engine->AppendInput("r", {}, true).ok());
  for (const auto& [id, c] : RunToCompletion(engine.get())) {
    out[id].tokens.insert(out[id].tokens.end(), c.tokens.begin(), c.tokens.end());
  }
  EXPECT_EQ(out["r"].tokens, one_shot.tokens);
  // Only the first piece differs from speaking sentence by sentence.
  const auto with = PhonemeClauses(one_shot.tokens);
  const auto without = PhonemeClauses(OneShot({{"codes_per_step", "5"}}).tokens);
  ASSERT_GE(with.size(), 2u);
  EXPECT_EQ(with[0], std::pair(PhonemesOf("Tell me"), ','));
  EXPECT_EQ(std::vector(with.begin() + 2, with.end()),
            std::vector(without.begin() + 1, without.end()));
}

// A request sets its own first piece; a hashed talker has none to set.
TEST(TalkerFirstPieceTest, ARequestSetsItsOwn) {
  EXPECT_EQ(OneShot({}, {{"first_piece_words", "2"}}).tokens,
            OneShot({{"first_piece_words", "2"}}).tokens);
  EXPECT_EQ(OneShot({{"first_piece_words", "2"}}, {{"first_piece_words", "0"}}).tokens,
            OneShot({}).tokens);
  std::unique_ptr<Engine> hashed = MustCreate({{"codes", "hashed"}});
  EngineRequest request = MakeRequest("r", {TextPayload("Hi")}, true, 10);
  (*request.params.mutable_extra())["first_piece_words"] = "2";
  EXPECT_THAT(std::string(hashed->Validate(request).message()),
              HasSubstr("unknown extra parameter 'first_piece_words'"));
  EXPECT_FALSE(CreateTalkerEngine({{"first_piece_words", "-1"}}).ok());
  EXPECT_THAT(
      std::string(
          CreateTalkerEngine({{"codes", "hashed"}, {"first_piece_words", "2"}}).status().message()),
      HasSubstr("unknown parameter 'first_piece_words'"));
}

}  // namespace
}  // namespace omnistage
