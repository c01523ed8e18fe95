#include "common/wav_reader.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/wav_writer.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

v1::AudioChunk Chunk(std::string pcm, int rate, int channels) {
  v1::AudioChunk chunk;
  chunk.set_pcm_s16le(std::move(pcm));
  chunk.set_sample_rate_hz(rate);
  chunk.set_channels(channels);
  return chunk;
}

TEST(WavReaderTest, ReadsWhatWavWriterWrites) {
  WavWriter wav;
  ASSERT_TRUE(wav.Append(Chunk(std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8), 22050, 2)).ok());
  absl::StatusOr<v1::AudioChunk> read = DecodeWav(wav.Encode());
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->pcm_s16le(), std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(read->sample_rate_hz(), 22050);
  EXPECT_EQ(read->channels(), 2);
}

TEST(WavReaderTest, SkipsOtherChunksAndReadsAStreamedLength) {
  std::string file = WavHeader(16000, 1, -1) + std::string("\x10\x00\x20\x00", 4);
  absl::StatusOr<v1::AudioChunk> streamed = DecodeWav(file);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(streamed->pcm_s16le().size(), 4u);
  // A LIST chunk (odd-sized, padded) before fmt.
  std::string header = WavHeader(16000, 1, 4);
  std::string with_list = header.substr(0, 12) + std::string("LIST\x03\x00\x00\x00" "abc" "\x00", 12) +
                          header.substr(12) + std::string("\x10\x00\x20\x00", 4);
  absl::StatusOr<v1::AudioChunk> listed = DecodeWav(with_list);
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->sample_rate_hz(), 16000);
}

TEST(WavReaderTest, SaysWhatIsWrong) {
  EXPECT_THAT(DecodeWav("hello").status().message(), HasSubstr("not a WAV file"));
  std::string header = WavHeader(16000, 1, 100);
  std::string long_fmt = header;
  long_fmt[16] = 100;  // the fmt chunk's size
  EXPECT_THAT(DecodeWav(long_fmt.substr(0, 40)).status().message(),
              HasSubstr("'fmt ' chunk says 100 bytes but 20"));
  EXPECT_EQ(DecodeWav(header + "ab")->pcm_s16le(), "ab");  // read to the end
  std::string eight_bit = header;
  eight_bit[34] = 8;  // bits per sample
  EXPECT_THAT(DecodeWav(eight_bit).status().message(), HasSubstr("not 16-bit PCM"));
  std::string slow = header;
  slow[24] = 10;  // 10 Hz
  slow[25] = slow[26] = slow[27] = 0;
  EXPECT_THAT(DecodeWav(slow).status().message(), HasSubstr("out of range"));
  EXPECT_EQ(ReadWav("/nonexistent.wav").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace omnistage
