// The talker with `codes: phonemes` (its default): text -> espeak-ng's phonemes
// as phoneme codes.
#include "stage_worker/engines/models/talker_phonemes.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/models/talker.h"
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
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr char kText[] =
    "Hello, world. Is this a question? Yes, it is; really! The quiet river sings softly near "
    "the old bridge";

std::unique_ptr<Engine> MustCreate(const std::map<std::string, std::string>& params = {}) {
  return engine_testing::MustCreate(kTalkerEngineName, params);
}

Collected OneShot(const std::string& text, uint32_t max_tokens = 100000) {
  std::unique_ptr<Engine> engine = MustCreate();
  EXPECT_TRUE(engine->Add(MakeRequest("r", {TextPayload(text)}, true, max_tokens)).ok());
  return RunToCompletion(engine.get())["r"];
}

Espeak& MustGetEspeak() {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  EXPECT_TRUE(espeak.ok()) << espeak.status();
  if (!espeak.ok()) std::abort();
  return **espeak;
}

TEST(TalkerPhonemesTest, SentenceEnds) {
  EXPECT_EQ(SentenceLength("Hello there. Next", false), 12u);
  EXPECT_EQ(SentenceLength("Really?! Yes", false), 8u);
  EXPECT_EQ(SentenceLength("Wait... what? ", false), 7u);
  EXPECT_EQ(SentenceLength("Wait...what? ", false), 12u);
  EXPECT_EQ(SentenceLength("Pi is 3.14 today.\nNext", false), 17u);
  // A final mark waits for the white space after it, or for the input's end.
  EXPECT_EQ(SentenceLength("Hello there.", false), 0u);
  EXPECT_EQ(SentenceLength("Hello there.", true), 12u);
  EXPECT_EQ(SentenceLength("no mark at all", true), 14u);
  EXPECT_EQ(SentenceLength("", true), 0u);
  // A run without an end is cut at its last space within kMaxSentenceBytes...
  std::string run;
  while (run.size() <= kMaxSentenceBytes) run += "word ";
  EXPECT_EQ(SentenceLength(run, false), kMaxSentenceBytes);  // "word " fits 400 times
  // ...or, with no space at all, not inside a UTF-8 character.
  std::string letters(kMaxSentenceBytes - 1, 'a');
  letters += "\xc3\xbc\xc3\xbc";  // two ü across the limit
  EXPECT_EQ(SentenceLength(letters, false), kMaxSentenceBytes - 1);
  EXPECT_EQ(SentenceLength(std::string(kMaxSentenceBytes, 'a'), false), 0u);  // may still end
}

// The codes are espeak-ng's own phonemes for the text: their clauses read back as
// espeak_TextToPhonemes' clauses for the whole text, each followed by its
// punctuation.
TEST(TalkerPhonemesTest, CodesAreEspeaksPhonemes) {
  const Collected out = OneShot(kText);
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_STOP);
  const std::vector<std::string> expected = MustGetEspeak().Phonemes(kText);
  ASSERT_THAT(expected, SizeIs(7));
  EXPECT_THAT(PhonemeClauses(out.tokens),
              ElementsAre(std::pair(expected[0], ','), std::pair(expected[1], '.'),
                          std::pair(expected[2], '?'), std::pair(expected[3], ','),
                          std::pair(expected[4], ','), std::pair(expected[5], '!'),
                          std::pair(expected[6], '.')));
  // And exactly the inventory's encoding of espeak-ng's phonemes.
  std::vector<int32_t> encoded;
  const std::vector<std::string> separated = MustGetEspeak().Phonemes(kText, kPhonemeSeparator);
  const char ends[] = {',', '.', '?', ',', ',', '!', '.'};
  for (size_t i = 0; i < separated.size(); ++i) {
    AppendPhonemeCodes(separated[i], &encoded);
    encoded.push_back(ClauseEndCode(ends[i]));
  }
  EXPECT_EQ(out.tokens, encoded);
}

TEST(TalkerPhonemesTest, ChunkingDoesNotChangeTheCodes) {
  const std::string text = kText;
  const Collected one_shot = OneShot(text);

  // One byte per AppendInput, stepping in between, `last` after the final byte.
  std::unique_ptr<Engine> engine = MustCreate({{"codes_per_step", "5"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false, 100000)).ok());
  std::map<std::string, Collected> out;
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(engine->AppendInput("r", {TextPayload(text.substr(i, 1))}, false).ok());
    if (i % 3 == 0 && engine->HasWork()) engine_testing::Collect(*engine->Step(), &out);
  }
  while (engine->HasWork()) engine_testing::Collect(*engine->Step(), &out);
  EXPECT_FALSE(out["r"].finished);  // the last sentence waits for its end
  ASSERT_TRUE(engine->AppendInput("r", {}, true).ok());
  for (const auto& [id, c] : RunToCompletion(engine.get())) {
    out[id].tokens.insert(out[id].tokens.end(), c.tokens.begin(), c.tokens.end());
    out[id].finish_reason = c.finish_reason;
  }
  EXPECT_EQ(out["r"].tokens, one_shot.tokens);
  EXPECT_EQ(out["r"].finish_reason, v1::FINISH_REASON_STOP);
}

TEST(TalkerPhonemesTest, Deterministic) {
  const Collected first = OneShot(kText);
  OneShot("Something else, in between. Entirely!");
  EXPECT_EQ(OneShot(kText).tokens, first.tokens);
}

TEST(TalkerPhonemesTest, SpeaksEachSentenceOnceItEnds) {
  std::unique_ptr<Engine> engine = MustCreate();
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false)).ok());
  ASSERT_TRUE(engine->AppendInput("r", {TextPayload("Hi there.")}, false).ok());
  EXPECT_FALSE(engine->HasWork());  // the '.' may still be "3.14"
  ASSERT_TRUE(engine->AppendInput("r", {TextPayload(" And")}, false).ok());
  ASSERT_TRUE(engine->HasWork());
  absl::StatusOr<std::vector<v1::RequestOutput>> first = engine->Step();
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const auto& ids = (*first)[0].payloads(0).tokens().ids();
  const std::vector<int32_t> codes(ids.begin(), ids.end());
  EXPECT_THAT(PhonemeClauses(codes),
              ElementsAre(std::pair(MustGetEspeak().Phonemes("Hi there.")[0], '.')));
  EXPECT_FALSE((*first)[0].finished());
  EXPECT_FALSE(engine->HasWork());  // "And" waits for its sentence's end

  ASSERT_TRUE(engine->AppendInput("r", {}, /*last=*/true).ok());
  const Collected rest = RunToCompletion(engine.get())["r"];
  EXPECT_THAT(PhonemeClauses(rest.tokens),
              ElementsAre(std::pair(MustGetEspeak().Phonemes("And")[0], '.')));
  EXPECT_EQ(rest.finish_reason, v1::FINISH_REASON_STOP);
}

TEST(TalkerPhonemesTest, StreamsCodesOverSteps) {
  std::unique_ptr<Engine> engine = MustCreate({{"codes_per_step", "4"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TextPayload(kText)}, true, 100000)).ok());
  const Collected out = RunToCompletion(engine.get())["r"];
  EXPECT_EQ(out.tokens, OneShot(kText).tokens);
  EXPECT_GE(out.outputs, static_cast<int>(out.tokens.size() / 4));
}

TEST(TalkerPhonemesTest, EmptyAndSilentInputStopWithNoCodes) {
  for (const char* text : {"", "  ", "... ..."}) {
    const Collected out = OneShot(text);
    EXPECT_TRUE(out.finished) << text;
    EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_STOP) << text;
    EXPECT_THAT(out.tokens, IsEmpty()) << text;
  }
}

TEST(TalkerPhonemesTest, MaxTokensCapsCodes) {
  const Collected out = OneShot(kText, /*max_tokens=*/7);
  EXPECT_THAT(out.tokens, SizeIs(7));
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_LENGTH);
  const std::vector<int32_t> all = OneShot(kText).tokens;
  EXPECT_THAT(out.tokens, ElementsAreArray(all.begin(), all.begin() + 7));
}

TEST(TalkerPhonemesTest, ParametersAndFaultKnobs) {
  EXPECT_THAT(
      std::string(
          CreateTalkerEngine({{"codes", "phonemes"}, {"chars_per_step", "4"}}).status().message()),
      HasSubstr("unknown parameter 'chars_per_step'"));
  EXPECT_THAT(
      std::string(
          CreateTalkerEngine({{"codes", "hashed"}, {"codes_per_step", "4"}}).status().message()),
      HasSubstr("unknown parameter 'codes_per_step'"));
  EXPECT_THAT(std::string(CreateTalkerEngine({{"codes", "words"}}).status().message()),
              HasSubstr("parameter codes: expected one of"));
  EXPECT_FALSE(CreateTalkerEngine({{"codes_per_step", "0"}}).ok());

  std::unique_ptr<Engine> engine = MustCreate({{"fail_at_step", "2"}, {"batch_size", "1"}});
  EXPECT_EQ(engine->capacity(), 1);
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TextPayload(kText)})).ok());
  EXPECT_TRUE(engine->Step().ok());
  EXPECT_EQ(engine->Step().status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(MustCreate({{"fail_utilities", "true"}})->Utility("ping", {}).ok());
}

}  // namespace
}  // namespace omnistage
