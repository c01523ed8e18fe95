#include "stage_worker/engines/models/talker.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::MakeRequest;
using engine_testing::RunToCompletion;
using ::testing::Each;
using ::testing::Ge;
using ::testing::IsEmpty;
using ::testing::Lt;
using ::testing::SizeIs;

constexpr char kText[] = "Hello, world. Ünïcode too.";

// The hashed talker; these tests are about its arithmetic.
std::unique_ptr<Engine> MustCreate(std::map<std::string, std::string> params = {}) {
  params.emplace("codes", "hashed");
  return engine_testing::MustCreate(kTalkerEngineName, params);
}

Collected OneShot(const std::string& text, uint32_t max_tokens = 1000, uint64_t seed = 0) {
  std::unique_ptr<Engine> engine = MustCreate();
  EXPECT_TRUE(engine->Add(MakeRequest("r", {TextPayload(text)}, true, max_tokens, seed)).ok());
  return RunToCompletion(engine.get())["r"];
}

TEST(TalkerTest, EmitsCodesPerCharacter) {
  const std::string text = kText;
  Collected out = OneShot(text);
  EXPECT_THAT(out.tokens, SizeIs(2 * text.size()));
  EXPECT_THAT(out.tokens, Each(Ge(0)));
  EXPECT_THAT(out.tokens, Each(Lt(1024)));
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_STOP);
  // 4 bytes per step; the last codes and the finish share a step.
  EXPECT_EQ(out.outputs, static_cast<int>((text.size() + 3) / 4));
  EXPECT_EQ(OneShot(text).tokens, out.tokens);
  EXPECT_NE(OneShot(text, 1000, /*seed=*/3).tokens, out.tokens);
}

TEST(TalkerTest, ChunkingDoesNotChangeTheCodes) {
  const std::string text = kText;
  const Collected one_shot = OneShot(text);

  // One byte per AppendInput, stepping in between, `last` with the final byte.
  std::unique_ptr<Engine> engine = MustCreate({{"chars_per_step", "3"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false, 1000)).ok());
  std::map<std::string, Collected> out;
  for (size_t i = 0; i < text.size(); ++i) {
    ASSERT_TRUE(
        engine->AppendInput("r", {TextPayload(text.substr(i, 1))}, i + 1 == text.size()).ok());
    if (i % 2 == 0) engine_testing::Collect(*engine->Step(), &out);
  }
  engine_testing::Collect(*engine->Step(), &out);
  for (const auto& [id, c] : RunToCompletion(engine.get())) {
    out[id].tokens.insert(out[id].tokens.end(), c.tokens.begin(), c.tokens.end());
    out[id].finish_reason = c.finish_reason;
  }
  EXPECT_EQ(out["r"].tokens, one_shot.tokens);
  EXPECT_EQ(out["r"].finish_reason, v1::FINISH_REASON_STOP);
}

TEST(TalkerTest, StartsBeforeInputIsComplete) {
  std::unique_ptr<Engine> engine = MustCreate();
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false)).ok());
  EXPECT_FALSE(engine->HasWork());
  ASSERT_TRUE(engine->AppendInput("r", {TextPayload("Hi")}, false).ok());
  EXPECT_TRUE(engine->HasWork());
  absl::StatusOr<std::vector<v1::RequestOutput>> first = engine->Step();
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].payloads(0).tokens().ids_size(), 4);
  EXPECT_FALSE((*first)[0].finished());
  EXPECT_FALSE(engine->HasWork());  // waiting for more text

  ASSERT_TRUE(engine->AppendInput("r", {}, /*last=*/true).ok());
  absl::StatusOr<std::vector<v1::RequestOutput>> last = engine->Step();
  ASSERT_TRUE(last.ok());
  ASSERT_EQ(last->size(), 1u);
  EXPECT_EQ((*last)[0].payloads_size(), 0);
  EXPECT_TRUE((*last)[0].finished());
  EXPECT_EQ((*last)[0].finish_reason(), v1::FINISH_REASON_STOP);
}

TEST(TalkerTest, EmptyCompleteInputStopsWithNoCodes) {
  Collected out = OneShot("");
  EXPECT_TRUE(out.finished);
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_THAT(out.tokens, IsEmpty());
}

TEST(TalkerTest, MaxTokensCapsCodes) {
  Collected out = OneShot(kText, /*max_tokens=*/5);
  EXPECT_THAT(out.tokens, SizeIs(5));
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_LENGTH);
  const std::vector<int32_t> all = OneShot(kText).tokens;
  EXPECT_EQ(std::vector<int32_t>(all.begin(), all.begin() + 5), out.tokens);
}

TEST(TalkerTest, Parameters) {
  std::unique_ptr<Engine> engine =
      MustCreate({{"codes_per_char", "3"}, {"codebook_size", "16"}, {"chars_per_step", "1"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TextPayload("abcd")}, true, 100)).ok());
  Collected out = RunToCompletion(engine.get())["r"];
  EXPECT_THAT(out.tokens, SizeIs(12));
  EXPECT_THAT(out.tokens, Each(Lt(16)));
  EXPECT_EQ(out.outputs, 4);
  EXPECT_FALSE(CreateTalkerEngine({{"codes", "hashed"}, {"codebook_size", "1"}}).ok());
  EXPECT_FALSE(engine->Validate(MakeRequest("r", {TokensPayload({1})})).ok());
}

}  // namespace
}  // namespace omnistage
