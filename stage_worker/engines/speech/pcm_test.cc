#include "stage_worker/engines/speech/pcm.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;

TEST(PcmTest, ResampledCountKeepsTheDuration) {
  EXPECT_EQ(ResampledCount(22050, 22050, 24000), 24000);
  EXPECT_EQ(ResampledCount(441, 22050, 24000), 480);
  EXPECT_EQ(ResampledCount(100, 22050, 24000), 108);  // 108.8, rounded down
  EXPECT_EQ(ResampledCount(0, 22050, 24000), 0);
  EXPECT_EQ(Resample(std::vector<int16_t>(441, 7), 22050, 24000).size(), 480u);
  EXPECT_TRUE(Resample({}, 22050, 24000).empty());
}

TEST(PcmTest, SameRateIsTheSameSamples) {
  const std::vector<int16_t> samples = {0, 1, -1, 32767, -32768, 12345};
  EXPECT_EQ(Resample(samples, 24000, 24000), samples);
}

TEST(PcmTest, InterpolatesLinearly) {
  // Rate doubled: every other output sample lies halfway, rounded half away
  // from zero; the last has no right neighbour and repeats.
  EXPECT_THAT(Resample({0, 10, -10, -11}, 8000, 16000),
              ElementsAre(0, 5, 10, 0, -10, -11, -11, -11));
  EXPECT_THAT(Resample(std::vector<int16_t>(100, -32768), 22050, 24000), Each(-32768));
  EXPECT_THAT(Resample(std::vector<int16_t>(100, 32767), 22050, 24000), Each(32767));
  // A ramp stays a ramp: sample j at position j * 147 / 160.
  std::vector<int16_t> ramp;
  for (int i = 0; i < 1470; ++i) ramp.push_back(static_cast<int16_t>(10 * i));
  const std::vector<int16_t> out = Resample(ramp, 22050, 24000);
  ASSERT_EQ(out.size(), 1600u);
  for (size_t j = 0; j + 2 < out.size(); ++j) {
    EXPECT_NEAR(out[j], 10.0 * j * 147 / 160, 0.5) << j;
  }
}

}  // namespace
}  // namespace omnistage
