#include "stage_worker/engines/models/vocoder.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::MakeRequest;
using engine_testing::RunToCompletion;
using ::testing::HasSubstr;

using engine_testing::PcmSamples;

// The tone vocoder; these tests are about its arithmetic.
std::unique_ptr<Engine> MustCreate(std::map<std::string, std::string> params = {}) {
  params.emplace("sound", "tones");
  return engine_testing::MustCreate(kVocoderEngineName, params);
}

std::vector<int32_t> Codes(int n) {
  std::vector<int32_t> codes;
  for (int i = 0; i < n; ++i) codes.push_back((i * 37 + 11) % 1024);
  return codes;
}

TEST(VocoderTest, SampleCountFollowsCodes) {
  std::unique_ptr<Engine> engine = MustCreate();
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TokensPayload(Codes(20))}, true, 100)).ok());
  absl::StatusOr<std::vector<v1::RequestOutput>> first = engine->Step();
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const v1::AudioChunk& chunk = (*first)[0].payloads(0).audio();
  EXPECT_EQ(chunk.sample_rate_hz(), 24000);
  EXPECT_EQ(chunk.channels(), 1);
  EXPECT_EQ(chunk.pcm_s16le().size(), 2u * 8 * 24000 * 40 / 1000);  // 8 codes per step

  Collected rest = RunToCompletion(engine.get())["r"];
  EXPECT_EQ(rest.pcm.size(), 2u * 12 * 960);
  EXPECT_EQ(rest.outputs, 2);
  EXPECT_EQ(rest.finish_reason, v1::FINISH_REASON_STOP);
}

TEST(VocoderTest, AudioIsAudibleWithoutClippingOrClicks) {
  std::unique_ptr<Engine> engine = MustCreate({{"sample_rate_hz", "16000"}, {"ms_per_code", "20"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TokensPayload(Codes(30))}, true, 100)).ok());
  std::vector<int16_t> samples = PcmSamples(RunToCompletion(engine.get())["r"].pcm);
  constexpr size_t kPerCode = 16000 * 20 / 1000;
  ASSERT_EQ(samples.size(), 30 * kPerCode);
  int peak = 0;
  for (int16_t s : samples) peak = std::max(peak, std::abs(static_cast<int>(s)));
  EXPECT_GT(peak, 32767 / 10);  // audible
  EXPECT_LT(peak, 32767 / 2);   // far from clipping
  for (size_t code = 0; code < 30; ++code) {
    // Each code fades in from and out to silence, so joins do not click.
    EXPECT_EQ(samples[code * kPerCode], 0);
    EXPECT_LT(std::abs(samples[(code + 1) * kPerCode - 1]), 200);
  }
}

TEST(VocoderTest, ChunkingDoesNotChangeTheAudio) {
  const std::vector<int32_t> codes = Codes(19);
  std::unique_ptr<Engine> one_shot = MustCreate();
  ASSERT_TRUE(one_shot->Add(MakeRequest("r", {TokensPayload(codes)}, true, 100)).ok());
  const Collected expected = RunToCompletion(one_shot.get())["r"];

  std::unique_ptr<Engine> engine = MustCreate({{"codes_per_step", "3"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false, 100)).ok());
  EXPECT_FALSE(engine->HasWork());
  std::map<std::string, Collected> out;
  for (size_t i = 0; i < codes.size(); ++i) {
    ASSERT_TRUE(engine->AppendInput("r", {TokensPayload({codes[i]})}, false).ok());
    EXPECT_TRUE(engine->HasWork());
    if (i % 3 == 1) engine_testing::Collect(*engine->Step(), &out);
  }
  engine_testing::Collect(*engine->Step(), &out);
  engine_testing::Collect(*engine->Step(), &out);
  EXPECT_FALSE(engine->HasWork());  // all consumed, waiting for `last`
  ASSERT_TRUE(engine->AppendInput("r", {}, true).ok());
  engine_testing::Collect(*engine->Step(), &out);
  EXPECT_TRUE(out["r"].finished);
  EXPECT_EQ(out["r"].finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_EQ(out["r"].pcm, expected.pcm);
}

// Later pieces sized by load: a full batch of one with later_piece_steps 4
// and a code arriving before each step turns its first code into audio at
// once, then four codes at a time, every fourth step; the audio is the same.
TEST(VocoderTest, LaterPiecesGatherCodesAtAFullBatch) {
  const std::vector<int32_t> codes = Codes(13);
  std::unique_ptr<Engine> one_shot = MustCreate();
  ASSERT_TRUE(one_shot->Add(MakeRequest("r", {TokensPayload(codes)}, true, 100)).ok());
  const Collected expected = RunToCompletion(one_shot.get())["r"];

  std::unique_ptr<Engine> engine = MustCreate({{"batch_size", "1"}, {"later_piece_steps", "4"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false, 100)).ok());
  std::string pcm;
  std::vector<size_t> codes_per_output;
  for (size_t i = 0; i < codes.size(); ++i) {
    ASSERT_TRUE(engine->AppendInput("r", {TokensPayload({codes[i]})}, i + 1 == codes.size()).ok());
    absl::StatusOr<std::vector<v1::RequestOutput>> step = engine->Step();
    ASSERT_TRUE(step.ok());
    for (const v1::RequestOutput& output : *step) {
      for (const v1::Payload& p : output.payloads()) {
        pcm += p.audio().pcm_s16le();
        codes_per_output.push_back(p.audio().pcm_s16le().size() / (2 * 24000 * 40 / 1000));
      }
    }
  }
  while (engine->HasWork()) {
    absl::StatusOr<std::vector<v1::RequestOutput>> step = engine->Step();
    ASSERT_TRUE(step.ok());
    for (const v1::RequestOutput& output : *step) {
      for (const v1::Payload& p : output.payloads()) pcm += p.audio().pcm_s16le();
    }
  }
  // Steps 1, 5 and 9 (1, 4, 4 codes); the last code completes the input, so
  // step 13 takes the rest at once.
  EXPECT_THAT(codes_per_output, ::testing::ElementsAre(1, 4, 4, 4));
  EXPECT_EQ(pcm, expected.pcm);
}

TEST(VocoderTest, MaxTokensCapsCodes) {
  std::unique_ptr<Engine> engine = MustCreate();
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TokensPayload(Codes(20))}, true, 10)).ok());
  Collected out = RunToCompletion(engine.get())["r"];
  EXPECT_EQ(out.pcm.size(), 2u * 10 * 960);
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_LENGTH);
}

TEST(VocoderTest, RejectsTextAndBadParameters) {
  std::unique_ptr<Engine> engine = MustCreate();
  EXPECT_THAT(std::string(engine->Validate(MakeRequest("r", {TextPayload("x")})).message()),
              HasSubstr("is text, but this engine accepts tokens"));
  EXPECT_THAT(
      std::string(
          CreateVocoderEngine({{"sound", "tones"}, {"ms_per_code", "0"}}).status().message()),
      HasSubstr("engine vocoder: parameter ms_per_code"));
}

}  // namespace
}  // namespace omnistage
