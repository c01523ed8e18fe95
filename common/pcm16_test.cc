#include "common/pcm16.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;

TEST(Pcm16Test, BytesAreLittleEndian) {
  std::string bytes = "x";
  AppendPcmS16le({0x0102, -2, 0}, &bytes);
  EXPECT_EQ(bytes, std::string("x\x02\x01\xfe\xff\x00\x00", 7));
}

TEST(Pcm16Test, MonoSamplesMixChannelsDown) {
  std::string mono;
  AppendPcmS16le({1, -2, 32767}, &mono);
  EXPECT_THAT(MonoSamples(mono, 1), ElementsAre(1, -2, 32767));
  std::string stereo;
  AppendPcmS16le({100, 300, -32768, -32768, 3, -4}, &stereo);
  EXPECT_THAT(MonoSamples(stereo, 2), ElementsAre(200, -32768, 0));  // -0.5 toward zero
}

}  // namespace
}  // namespace omnistage
