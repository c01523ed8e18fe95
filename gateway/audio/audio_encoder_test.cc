// Every response format, encoded here and read back by real decoders
// (Debian's ffprobe and ffmpeg): the codec and rate each declares, a duration
// that matches the audio, the samples themselves for the lossless formats and
// the signal's level for the lossy ones; and each one streams (bytes come out
// before the end).
#include "gateway/audio/audio_encoder.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/testing/child_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

constexpr int kRate = 24000;
constexpr double kSeconds = 1.5;

// A 440 Hz tone at a quarter of full scale.
std::vector<int16_t> Tone() {
  std::vector<int16_t> samples(static_cast<size_t>(kRate * kSeconds));
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i] = static_cast<int16_t>(8192 * std::sin(2 * M_PI * 440 * i / kRate));
  }
  return samples;
}

double Rms(const std::vector<int16_t>& samples) {
  double sum = 0;
  for (int16_t s : samples) sum += static_cast<double>(s) * s;
  return samples.empty() ? 0 : std::sqrt(sum / samples.size());
}

std::string Scratch(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `argv` to its end (at most 30 s); its exit code.
int Run(const std::vector<std::string>& argv) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
  if (!process.ok()) return -1;
  std::optional<int> code = (*process)->Wait(absl::Seconds(30));
  return code.value_or(-1);
}

// What ffprobe reads in `path`: codec_name, sample_rate, duration.
std::map<std::string, std::string> Probe(const std::string& path,
                                         const std::vector<std::string>& input_options = {}) {
  const std::string out = path + ".probe";
  std::vector<std::string> argv = {"/usr/bin/ffprobe", "-v", "error"};
  argv.insert(argv.end(), input_options.begin(), input_options.end());
  for (const char* arg : {"-show_entries", "stream=codec_name,sample_rate:format=duration", "-of",
                          "default=noprint_wrappers=1", "-o"}) {
    argv.push_back(arg);
  }
  argv.push_back(out);
  argv.push_back(path);
  EXPECT_EQ(Run(argv), 0) << "ffprobe could not read " << path;
  std::map<std::string, std::string> fields;
  for (absl::string_view line : absl::StrSplit(ReadFile(out), '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    fields[kv.first] = kv.second;
  }
  return fields;
}

// `path` decoded by ffmpeg to mono 16-bit samples at kRate.
std::vector<int16_t> Decode(const std::string& path,
                            const std::vector<std::string>& input_options = {}) {
  const std::string raw = path + ".raw";
  std::vector<std::string> argv = {"/usr/bin/ffmpeg", "-v", "error", "-y"};
  argv.insert(argv.end(), input_options.begin(), input_options.end());
  for (const std::string& arg :
       {std::string("-i"), path, std::string("-f"), std::string("s16le"), std::string("-ac"),
        std::string("1"), std::string("-ar"), absl::StrCat(kRate), raw}) {
    argv.push_back(arg);
  }
  EXPECT_EQ(Run(argv), 0) << "ffmpeg could not decode " << path;
  const std::string bytes = ReadFile(raw);
  std::vector<int16_t> samples(bytes.size() / 2);
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i] = static_cast<int16_t>(static_cast<uint8_t>(bytes[2 * i]) |
                                      (static_cast<uint8_t>(bytes[2 * i + 1]) << 8));
  }
  return samples;
}

struct Encoded {
  std::string bytes;
  // Bytes out before Finish().
  size_t streamed = 0;
};

Encoded Encode(const std::string& format) {
  absl::StatusOr<std::unique_ptr<AudioEncoder>> encoder = MakeAudioEncoder(format, kRate);
  EXPECT_TRUE(encoder.ok()) << encoder.status();
  Encoded encoded;
  if (!encoder.ok()) return encoded;
  const std::vector<int16_t> tone = Tone();
  // In 20 ms pieces, as a vocoder's steps hand them out.
  for (size_t at = 0; at < tone.size(); at += kRate / 50) {
    const size_t n = std::min<size_t>(kRate / 50, tone.size() - at);
    EXPECT_TRUE((*encoder)->Encode(absl::MakeConstSpan(tone.data() + at, n), &encoded.bytes).ok());
  }
  encoded.streamed = encoded.bytes.size();
  EXPECT_TRUE((*encoder)->Finish(&encoded.bytes).ok());
  return encoded;
}

double Seconds(const std::string& duration) {
  double seconds = 0;
  EXPECT_TRUE(absl::SimpleAtod(duration, &seconds)) << "duration '" << duration << "'";
  return seconds;
}

struct Case {
  std::string format;
  std::string codec;
  std::string rate;
  bool lossless;
  // Whether the stream says how long it is (a streamed FLAC cannot: its
  // STREAMINFO goes out before the audio is known, and its length is found by
  // decoding).
  bool states_duration = true;
};

class AudioEncoderTest : public ::testing::TestWithParam<Case> {};

TEST_P(AudioEncoderTest, ARealDecoderReadsWhatWasEncoded) {
  const Case& c = GetParam();
  const Encoded encoded = Encode(c.format);
  ASSERT_FALSE(encoded.bytes.empty());
  // Streams: most of it left before the end.
  EXPECT_GT(encoded.streamed, encoded.bytes.size() / 2) << c.format;
  const std::string path = Scratch(absl::StrCat("tone.", c.format));
  WriteFile(path, encoded.bytes);
  const std::vector<std::string> input =
      c.format == "pcm" ? std::vector<std::string>{"-f", "s16le", "-ar", "24000", "-ac", "1"}
                        : std::vector<std::string>{};
  std::map<std::string, std::string> probed = Probe(path, input);
  EXPECT_EQ(probed["codec_name"], c.codec);
  EXPECT_EQ(probed["sample_rate"], c.rate);
  if (c.states_duration) {
    EXPECT_NEAR(Seconds(probed["duration"]), kSeconds, 0.1) << c.format;
  }

  const std::vector<int16_t> tone = Tone();
  const std::vector<int16_t> decoded = Decode(path, input);
  if (c.lossless) {
    EXPECT_EQ(decoded, tone) << c.format << " changed the samples";
  } else {
    // A lossy codec keeps the tone's level (within 1.5 dB) and its length
    // (within its priming and padding).
    EXPECT_NEAR(20 * std::log10(Rms(decoded) / Rms(tone)), 0, 1.5) << c.format;
    EXPECT_NEAR(static_cast<double>(decoded.size()) / kRate, kSeconds, 0.1) << c.format;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, AudioEncoderTest,
                         ::testing::Values(Case{"mp3", "mp3", "24000", false},
                                           Case{"opus", "opus", "48000", false},
                                           Case{"flac", "flac", "24000", true, false},
                                           Case{"wav", "pcm_s16le", "24000", true},
                                           Case{"pcm", "pcm_s16le", "24000", true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.format;
                         });

TEST(AudioEncoderFormatsTest, AnUnservedFormatNamesTheServedOnes) {
  absl::StatusOr<std::unique_ptr<AudioEncoder>> aac = MakeAudioEncoder("aac", kRate);
  ASSERT_FALSE(aac.ok());
  EXPECT_EQ(aac.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(aac.status().message(), HasSubstr("mp3, opus, flac, wav, pcm"));
}

TEST(AudioEncoderFormatsTest, Mp3RefusesARateMpegHasNot) {
  absl::StatusOr<std::unique_ptr<AudioEncoder>> mp3 = MakeAudioEncoder("mp3", 23000);
  ASSERT_FALSE(mp3.ok());
  EXPECT_THAT(mp3.status().message(), HasSubstr("no 23000 Hz rate"));
}

TEST(AudioEncoderFormatsTest, AnEncoderWithNoAudioStillEndsAsItsFormat) {
  for (const char* format : {"flac", "wav", "opus", "mp3"}) {
    absl::StatusOr<std::unique_ptr<AudioEncoder>> encoder = MakeAudioEncoder(format, kRate);
    ASSERT_TRUE(encoder.ok()) << encoder.status();
    std::string bytes;
    ASSERT_TRUE((*encoder)->Finish(&bytes).ok()) << format;
    if (std::string(format) == "mp3") continue;  // An MP3 stream of no frames is no bytes.
    EXPECT_FALSE(bytes.empty()) << format;
  }
}

}  // namespace
}  // namespace omnistage
