#include "common/wav_writer.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

uint32_t LE(const std::string& s, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(s[at + i])) << (8 * i);
  return v;
}

v1::AudioChunk Chunk(int rate, std::string pcm) {
  v1::AudioChunk chunk;
  chunk.set_sample_rate_hz(rate);
  chunk.set_pcm_s16le(std::move(pcm));
  return chunk;
}

TEST(WavWriterTest, HeaderDescribesTheSamples) {
  WavWriter wav;
  ASSERT_TRUE(wav.Append(Chunk(24000, std::string(4800, '\x01'))).ok());
  ASSERT_TRUE(wav.Append(Chunk(24000, std::string(4800, '\x02'))).ok());
  const std::string file = wav.Encode();
  ASSERT_EQ(file.size(), 44u + 9600u);
  EXPECT_EQ(file.substr(0, 4), "RIFF");
  EXPECT_EQ(LE(file, 4, 4), 36u + 9600u);
  EXPECT_EQ(file.substr(8, 8), "WAVEfmt ");
  EXPECT_EQ(LE(file, 20, 2), 1u);      // PCM
  EXPECT_EQ(LE(file, 22, 2), 1u);      // mono
  EXPECT_EQ(LE(file, 24, 4), 24000u);  // sample rate
  EXPECT_EQ(LE(file, 28, 4), 48000u);  // byte rate
  EXPECT_EQ(LE(file, 34, 2), 16u);     // bits per sample
  EXPECT_EQ(file.substr(36, 4), "data");
  EXPECT_EQ(LE(file, 40, 4), 9600u);
  EXPECT_EQ(file[44], '\x01');
  EXPECT_EQ(file.back(), '\x02');
  EXPECT_DOUBLE_EQ(wav.seconds(), 0.2);
}

TEST(WavWriterTest, RejectsChunksThatDisagree) {
  WavWriter wav;
  ASSERT_TRUE(wav.Append(Chunk(24000, "ab")).ok());
  EXPECT_FALSE(wav.Append(Chunk(16000, "cd")).ok());
  EXPECT_FALSE(wav.Append(Chunk(24000, "odd")).ok());
  EXPECT_FALSE(wav.Append(Chunk(0, "ab")).ok());
  EXPECT_EQ(wav.bytes(), 2u);
}

}  // namespace
}  // namespace omnistage
