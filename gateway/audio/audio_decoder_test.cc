// Real files, made here by Debian's ffmpeg from a generated tone, decoded:
// each format at several rates, mono and stereo (the rate, the channel count,
// the duration, a signal that is not silence); the mix down to mono, exactly;
// and each refusal (empty, not audio, cut short, no samples, rates and
// channel counts out of range, longer than the limit).
#include "gateway/audio/audio_decoder.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/testing/child_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr double kSeconds = 1.5;

double Rms(const std::vector<int16_t>& samples) {
  double sum = 0;
  for (int16_t s : samples) sum += static_cast<double>(s) * s;
  return samples.empty() ? 0 : std::sqrt(sum / samples.size());
}

std::string Scratch(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `argv` to its end (at most 30 s); its exit code.
int RunToEnd(const std::vector<std::string>& argv) {
  absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
  if (!process.ok()) return -1;
  std::optional<int> code = (*process)->Wait(absl::Seconds(30));
  return code.value_or(-1);
}

// The file ffmpeg makes of the lavfi source `source` with `options` (codec,
// rate, channels): its bytes.
std::string Make(const std::string& name, const std::string& source,
                 const std::vector<std::string>& options) {
  const std::string path = Scratch(name);
  std::vector<std::string> argv = {"/usr/bin/ffmpeg", "-v", "error", "-y", "-f", "lavfi",
                                   "-i", source};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.push_back(path);
  EXPECT_EQ(RunToEnd(argv), 0) << "ffmpeg could not make " << name << " from " << source;
  return ReadFile(path);
}

std::string Tone(double seconds) {
  return absl::StrCat("sine=frequency=440:duration=", seconds);
}

// ffmpeg's sine is at 1/8 of full scale: an RMS of 4096 / sqrt(2) = 2896. Its
// stereo is the mono tone at -3 dB in each channel (ffmpeg's upmix puts the
// centre there), so their average too: 2048.
double ToneRms(int channels) { return channels == 2 ? 2048 : 2896; }

struct Case {
  std::string name;   // the file's name, its extension ffmpeg's muxer
  std::string codec;  // ffmpeg's encoder
  int rate;
  int channels;
  std::string format;  // DecodedAudio::format
  // How far the decoded duration may be from the tone's.
  double tolerance_s;
  // How far the RMS may be from the tone's, a fraction of it.
  double rms_tolerance;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// The lossless formats keep every sample. The lossy ones, as ffmpeg writes
// them, say exactly where the signal starts and ends (mp3: the LAME tag's
// encoder delay and padding; opus: the pre-skip and the last page's granule
// position; vorbis: granule positions), and libsndfile trims to it: the
// durations measured are exact. 10 ms leaves room for another encoder build.
constexpr double kLossless = 0;
constexpr double kGapless = 0.010;
// LAME's tone is 0.45 dB (5%) below the source, as ffmpeg's own decoder reads
// it too; an untagged one's delay and padding, silence, take 2% more.
constexpr double kMp3Rms = 0.10;

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (int rate : {22050, 44100, 48000}) {
    for (int channels : {1, 2}) {
      const std::string tag = absl::StrCat(rate, "_", channels);
      cases.push_back({absl::StrCat("pcm_", tag, ".wav"), "pcm_s16le", rate, channels, "wav",
                       kLossless, 0.001});
      cases.push_back({absl::StrCat("flac_", tag, ".flac"), "flac", rate, channels, "flac",
                       kLossless, 0.001});
      cases.push_back({absl::StrCat("vorbis_", tag, ".ogg"), "libvorbis", rate, channels, "ogg",
                       kGapless, 0.02});
      cases.push_back({absl::StrCat("mp3_", tag, ".mp3"), "libmp3lame", rate, channels, "mp3",
                       kGapless, kMp3Rms});
    }
  }
  // Opus takes 8, 12, 16, 24 and 48 kHz; libsndfile decodes at the rate the
  // file's header names.
  for (int rate : {16000, 48000}) {
    for (int channels : {1, 2}) {
      cases.push_back({absl::StrCat("opus_", rate, "_", channels, ".ogg"), "libopus", rate,
                       channels, "ogg", kGapless, 0.02});
    }
  }
  return cases;
}

class EachFormat : public ::testing::TestWithParam<Case> {};

TEST_P(EachFormat, DecodesRateChannelsDurationAndSignal) {
  const Case& c = GetParam();
  const std::string bytes = Make(c.name, Tone(kSeconds),
                                 {"-ar", absl::StrCat(c.rate), "-ac", absl::StrCat(c.channels),
                                  "-c:a", c.codec});
  ASSERT_FALSE(bytes.empty());
  absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_EQ(audio->format, c.format);
  EXPECT_EQ(audio->sample_rate_hz, c.rate);
  EXPECT_EQ(audio->channels, c.channels);
  EXPECT_NEAR(audio->seconds(), kSeconds, c.tolerance_s);
  EXPECT_NEAR(Rms(audio->mono), ToneRms(c.channels), ToneRms(c.channels) * c.rms_tolerance);
}

INSTANTIATE_TEST_SUITE_P(Files, EachFormat, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name) {
                             if (ch == '.') ch = '_';
                           }
                           return name;
                         });

// Without a LAME or Xing tag (a stream's mp3, as the gateway's own speech
// responses are) libsndfile's frame count is an estimate from the file's size
// (measured: 0.4 to 1.6% over), and nothing says where the signal starts and
// ends: the decoding holds LAME's delay (576 samples), the decoder's (529) and
// the last frame's padding (under a frame: 1152 samples at 32 to 48 kHz, 576
// below), so from 0 to 1681 samples more, 76 ms at 22050 Hz (measured: 36 to
// 67 ms). Not truncated for all that.
TEST(AudioDecoderTest, Mp3WithoutALengthTagIsWholeAndNotTruncated) {
  for (int rate : {22050, 24000, 44100, 48000}) {
    for (int channels : {1, 2}) {
      SCOPED_TRACE(absl::StrCat(rate, " Hz, ", channels, " channels"));
      const std::string bytes =
          Make(absl::StrCat("untagged_", rate, "_", channels, ".mp3"), Tone(kSeconds),
               {"-ar", absl::StrCat(rate), "-ac", absl::StrCat(channels), "-c:a", "libmp3lame",
                "-write_xing", "0"});
      absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes, 60);
      ASSERT_TRUE(audio.ok()) << audio.status();
      EXPECT_EQ(audio->format, "mp3");
      EXPECT_GE(audio->seconds(), kSeconds);
      EXPECT_LE(audio->seconds(), kSeconds + 0.080);
      EXPECT_NEAR(Rms(audio->mono), ToneRms(channels), ToneRms(channels) * kMp3Rms);
    }
  }
}

// An mp3 cut short decodes what it holds: its frames need no header, and the
// length in its tag is not checked (without a tag there is only an estimate).
TEST(AudioDecoderTest, Mp3CutShortDecodesWhatItHolds) {
  const std::string bytes =
      Make("cut.mp3", Tone(kSeconds), {"-ar", "44100", "-ac", "2", "-c:a", "libmp3lame"});
  absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes.substr(0, bytes.size() / 2), 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_GT(audio->seconds(), 0.5);
  EXPECT_LT(audio->seconds(), 1.0);
}

// Left at 1/4 of full scale, right at 1/2: every mono sample is their average.
TEST(AudioDecoderTest, MixesChannelsToTheirAverageExactly) {
  for (const char* codec : {"pcm_s16le", "flac", "pcm_f32le"}) {
    SCOPED_TRACE(codec);
    const std::string bytes =
        Make(absl::StrCat("mix_", codec, codec[0] == 'f' ? ".flac" : ".wav"),
             "aevalsrc=0.25|0.5:s=16000:d=0.5", {"-c:a", codec});
    absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes, 60);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->channels, 2);
    ASSERT_EQ(audio->mono.size(), 8000u);
    EXPECT_EQ(audio->mono.front(), 12288);
    EXPECT_EQ(audio->mono.back(), 12288);
    EXPECT_EQ(Rms(audio->mono), 12288);
  }
}

TEST(AudioDecoderTest, EmptyIsRefused) {
  absl::StatusOr<DecodedAudio> audio = DecodeAudioFile("", 60);
  EXPECT_TRUE(absl::IsInvalidArgument(audio.status())) << audio.status();
  EXPECT_THAT(audio.status().message(), HasSubstr("empty"));
}

TEST(AudioDecoderTest, TextAndRandomBytesAreNotAudio) {
  std::mt19937 random(7);
  std::string noise(4096, '\0');
  for (char& byte : noise) byte = static_cast<char>(random() & 0xff);
  for (const std::string& bytes :
       {std::string("{\"model\": \"whisper-1\", \"language\": \"en\"}\n"), noise}) {
    absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes, 60);
    EXPECT_TRUE(absl::IsInvalidArgument(audio.status())) << audio.status();
    EXPECT_THAT(audio.status().message(),
                AllOf(HasSubstr("not audio"), HasSubstr("wav, flac, ogg (opus, vorbis), mp3"),
                      HasSubstr("libsndfile says \"Format not recognised.\"")));
  }
}

// libsndfile reads a wav or aiff cut short to its end without a word (its frame
// count is then what the file holds), and a flac to its last whole frame (its
// count stays the header's): each is refused.
TEST(AudioDecoderTest, WavAiffAndFlacCutShortAreTruncated) {
  for (const auto& [name, codec] : std::vector<std::pair<std::string, std::string>>{
           {"cut.wav", "pcm_s16le"}, {"cut.aiff", "pcm_s16be"}, {"cut.flac", "flac"}}) {
    SCOPED_TRACE(name);
    const std::string bytes =
        Make(name, Tone(kSeconds), {"-ar", "44100", "-ac", "2", "-c:a", codec});
    ASSERT_TRUE(DecodeAudioFile(bytes, 60).ok());
    for (double part : {0.5, 0.9}) {
      absl::StatusOr<DecodedAudio> audio =
          DecodeAudioFile(bytes.substr(0, static_cast<size_t>(bytes.size() * part)), 60);
      EXPECT_TRUE(absl::IsInvalidArgument(audio.status())) << audio.status();
      EXPECT_THAT(audio.status().message(), HasSubstr("truncated"));
    }
  }
}

// A stream's wav: its header, written before the length was known, says "to
// the end" (ffmpeg's 0xFFFFFFFF; common/wav_writer.h's 0xFFFFFFDB), which is
// not a promise.
TEST(AudioDecoderTest, StreamedWavIsReadToItsEnd) {
  const std::string bytes =
      Make("streamed.wav", Tone(kSeconds), {"-ar", "16000", "-c:a", "pcm_s16le",
                                            "-fflags", "+bitexact"});
  ASSERT_EQ(bytes.substr(36, 4), "data");
  for (const std::string& size : {std::string("\xff\xff\xff\xff"), std::string("\xdb\xff\xff\xff")}) {
    std::string streamed = bytes;
    streamed.replace(4, 4, "\xff\xff\xff\xff");
    streamed.replace(40, 4, size);
    absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(streamed, 60);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->mono.size(), 24000u);
  }
}

TEST(AudioDecoderTest, WavOfNoSamplesHoldsNoAudio) {
  const std::string bytes =
      Make("empty.wav", "anullsrc=r=16000:cl=mono", {"-t", "0", "-c:a", "pcm_s16le"});
  ASSERT_FALSE(bytes.empty());
  absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes, 60);
  EXPECT_TRUE(absl::IsInvalidArgument(audio.status())) << audio.status();
  EXPECT_THAT(audio.status().message(), HasSubstr("holds no audio"));
}

// A 16-bit PCM wav of `frames` silent frames, for headers ffmpeg does not write.
std::string PcmWav(int rate, int channels, int frames) {
  auto le = [](uint32_t value, int bytes) {
    std::string out;
    for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
    return out;
  };
  const uint32_t data = static_cast<uint32_t>(frames * channels * 2);
  return absl::StrCat("RIFF", le(36 + data, 4), "WAVEfmt ", le(16, 4), le(1, 2),
                      le(channels, 2), le(rate, 4), le(rate * channels * 2, 4),
                      le(channels * 2, 2), le(16, 2), "data", le(data, 4),
                      std::string(data, '\0'));
}

TEST(AudioDecoderTest, RatesAndChannelCountsOutOfRangeAreRefused) {
  ASSERT_TRUE(DecodeAudioFile(PcmWav(8000, 32, 800), 60).ok());
  ASSERT_TRUE(DecodeAudioFile(PcmWav(384000, 1, 800), 60).ok());
  for (const auto& [bytes, expected] : std::vector<std::pair<std::string, std::string>>{
           {PcmWav(4000, 1, 800), "the wav file's rate is 4000 Hz; the rates taken are 8000 to 384000 Hz"},
           {PcmWav(500000, 1, 800), "the wav file's rate is 500000 Hz"},
           {PcmWav(16000, 33, 800), "the wav file has 33 channels; at most 32 are taken"}}) {
    absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes, 60);
    EXPECT_TRUE(absl::IsInvalidArgument(audio.status())) << audio.status();
    EXPECT_THAT(audio.status().message(), HasSubstr(expected));
  }
}

// The limit: a wav's and a flac's length is known from the header, before any
// decoding; an mp3's (its LAME tag) and an ogg's (its last granule position)
// once the decoding passes the limit; a flac written to a pipe has no length
// in its header, so all that is said is that the limit is passed.
// Metadata chunks are not read: libsndfile 1.2.0's parser of a LIST chunk goes
// round for ever on a sub-chunk whose size lies (this 135-byte file, which a
// fuzzer made, held it for good), and the sound needs none of them.
TEST(AudioDecoderTest, MetadataChunksThatLieAreNotRead) {
  const std::string lying(
      "\x52\x49\x46\x46\xaa\x06\x00\x00\x57\x41\x56\x45\x66\x6d\x74\x20"
      "\x28\x00\x00\x00\xfe\xff\x01\x00\x40\x1f\x00\x00\x00\x7d\x00\x00"
      "\x04\x00\x20\x00\x16\x00\x20\x00\x04\x00\x00\x00\x03\x00\x00\x00"
      "\x00\x00\x10\x00\x80\x00\x00\xaa\x00\x38\x9b\x71\x66\x61\x63\x74"
      "\x00\x00\x00\x00\x04\x01\x00\x90\x4c\x49\x53\x54\x1e\x00\x00\x00"
      "\x49\x4e\x46\x54\xf8\xff\xff\xff\x4c\x61\x76\x66\x32\x39\x2e\x32"
      "\x37\x2e\x3f\x30\x30\x00\x64\x61\x74\x61\x40\x06\x00\x00\x00\x00"
      "\x00\x00\x00\x49\x53\x54\x1e\x00\xc0\x00\xfe\xff\x01\x00\x40\x78"
      "\x78\x00\x78\x78\x78\x78\x1f",
      135);
  // It ends, however it ends (here: no sound to be found once the metadata is
  // left out).
  EXPECT_FALSE(DecodeAudioFile(lying, 60).ok());
  // A sound with a LIST before or after it is the sound.
  const std::string wav = PcmWav(16000, 1, 1600);
  const std::string fmt = wav.substr(12, 24), data = wav.substr(36);
  const std::string list("LIST\x0c\0\0\0INFOISFT\x00\0\0\0", 20);
  for (const std::string& body : {fmt + list + data, fmt + data + list}) {
    const std::string file = absl::StrCat("RIFF", std::string(4, '\0'), "WAVE", body);
    absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(file, 60);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->mono.size(), 1600u);
    EXPECT_EQ(audio->sample_rate_hz, 16000);
  }
}

TEST(AudioDecoderTest, AudioLongerThanTheLimitIsRefused) {
  for (const auto& [name, codec] : std::vector<std::pair<std::string, std::string>>{
           {"long.wav", "pcm_s16le"},
           {"long.flac", "flac"},
           {"long.mp3", "libmp3lame"},
           {"long.ogg", "libvorbis"}}) {
    SCOPED_TRACE(name);
    const std::string bytes = Make(name, Tone(3), {"-ar", "44100", "-c:a", codec});
    absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes, 1);
    EXPECT_TRUE(absl::IsInvalidArgument(audio.status())) << audio.status();
    EXPECT_THAT(audio.status().message(), HasSubstr("the audio is 3 s long; the limit is 1 s"));
    EXPECT_TRUE(DecodeAudioFile(bytes, 3).ok());
  }

  const std::string piped = Scratch("piped.flac");
  ASSERT_EQ(RunToEnd({"/bin/sh", "-c",
                 absl::StrCat("/usr/bin/ffmpeg -v error -y -f lavfi -i ", Tone(3),
                              " -c:a flac -f flac - | cat > ", piped)}),
            0);
  absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(ReadFile(piped), 1.5);
  EXPECT_TRUE(absl::IsInvalidArgument(audio.status())) << audio.status();
  EXPECT_THAT(audio.status().message(),
              HasSubstr("the audio is more than 1.5 s long; the limit is 1.5 s"));
  EXPECT_TRUE(DecodeAudioFile(ReadFile(piped), 3).ok());
}

TEST(AudioDecoderTest, DecodesInManyThreadsAtOnce) {
  const std::vector<std::string> files = {
      Make("threads.flac", Tone(kSeconds), {"-c:a", "flac"}),
      Make("threads.mp3", Tone(kSeconds), {"-c:a", "libmp3lame"}),
      Make("threads.ogg", Tone(kSeconds), {"-ar", "48000", "-c:a", "libopus"}),
      "not audio at all",
  };
  std::vector<std::vector<int16_t>> expected;
  for (const std::string& bytes : files) {
    absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(bytes, 60);
    expected.push_back(audio.ok() ? audio->mono : std::vector<int16_t>());
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        const size_t i = (t + round) % files.size();
        absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(files[i], 60);
        if ((audio.ok() ? audio->mono : std::vector<int16_t>()) != expected[i]) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(8, 0));
}

}  // namespace
}  // namespace omnistage
