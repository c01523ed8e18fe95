#include "common/modality.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(ModalityTest, NamesRoundTrip) {
  for (v1::Modality m : {v1::MODALITY_TEXT, v1::MODALITY_AUDIO, v1::MODALITY_TOKENS}) {
    absl::StatusOr<v1::Modality> parsed = ParseModality(ModalityName(m));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, m);
  }
  EXPECT_EQ(ModalityName(v1::MODALITY_UNSPECIFIED), "unspecified");
  EXPECT_EQ(ParseModality("unspecified").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ParseModality("Text").status().message()),
              ::testing::HasSubstr("expected text, audio or tokens, got 'Text'"));
}

TEST(ModalityTest, AudioSecondsAreFramesOverTheRate) {
  v1::AudioChunk audio;
  audio.set_pcm_s16le(std::string(48000, '\0'));  // 24000 16-bit samples.
  audio.set_sample_rate_hz(24000);
  EXPECT_DOUBLE_EQ(AudioSecondsOf(audio), 1.0);  // Channels 0: mono.
  audio.set_channels(2);
  EXPECT_DOUBLE_EQ(AudioSecondsOf(audio), 0.5);
  audio.set_sample_rate_hz(0);
  EXPECT_DOUBLE_EQ(AudioSecondsOf(audio), 0.0);
}

TEST(ModalityTest, FinishReasonNamesAreTheMetricsLabels) {
  EXPECT_EQ(FinishReasonName(v1::FINISH_REASON_STOP), "stop");
  EXPECT_EQ(FinishReasonName(v1::FINISH_REASON_LENGTH), "length");
  EXPECT_EQ(FinishReasonName(v1::FINISH_REASON_ABORT), "abort");
  EXPECT_EQ(FinishReasonName(v1::FINISH_REASON_ERROR), "error");
}

}  // namespace
}  // namespace omnistage
