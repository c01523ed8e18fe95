#include "stage_worker/engines/speech/resampler.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/speech/pcm.h"

namespace omnistage {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<int16_t> Tone(double hz, int rate_hz, int count, double amplitude = 10000) {
  std::vector<int16_t> samples(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    samples[static_cast<size_t>(i)] =
        static_cast<int16_t>(std::lround(amplitude * std::sin(2 * kPi * hz * i / rate_hz)));
  }
  return samples;
}

std::vector<int16_t> Resampled(absl::Span<const int16_t> samples, int from_hz, int to_hz,
                               size_t piece) {
  StreamResampler resampler(from_hz, to_hz);
  std::vector<int16_t> out;
  for (size_t i = 0; i < samples.size(); i += piece) {
    resampler.Push(samples.subspan(i, piece), &out);
  }
  resampler.Flush(&out);
  return out;
}

// Root mean square over the middle half (away from the edges' transients).
double MiddleRms(const std::vector<int16_t>& samples) {
  double sum = 0;
  const size_t begin = samples.size() / 4, end = 3 * samples.size() / 4;
  for (size_t i = begin; i < end; ++i) sum += static_cast<double>(samples[i]) * samples[i];
  return std::sqrt(sum / static_cast<double>(end - begin));
}

TEST(StreamResamplerTest, EqualRatesCopy) {
  const std::vector<int16_t> samples = {1, -2, 3, 32767, -32768};
  EXPECT_EQ(Resampled(samples, 16000, 16000, 2), samples);
}

TEST(StreamResamplerTest, CountsAsResampledCount) {
  for (int from_hz : {8000, 11025, 22050, 44100, 48000, 44101}) {
    const std::vector<int16_t> samples = Tone(440, from_hz, 12345);
    EXPECT_EQ(static_cast<int64_t>(Resampled(samples, from_hz, 16000, 1000).size()),
              ResampledCount(12345, from_hz, 16000))
        << from_hz;
  }
}

// Failover and concurrent requests need the same transcript however the audio
// was cut.
TEST(StreamResamplerTest, OutputDoesNotDependOnThePieces) {
  std::vector<int16_t> noise(20000);
  uint32_t state = 12345;
  for (int16_t& sample : noise) {
    state = state * 1664525u + 1013904223u;
    sample = static_cast<int16_t>(state >> 16);
  }
  for (int from_hz : {22050, 48000, 44101, 8000}) {
    const std::vector<int16_t> whole = Resampled(noise, from_hz, 16000, noise.size());
    for (size_t piece : {1, 7, 441, 960, 4099}) {
      EXPECT_EQ(Resampled(noise, from_hz, 16000, piece), whole) << from_hz << " " << piece;
    }
  }
}

TEST(StreamResamplerTest, KeepsAToneInTheBand) {
  for (int from_hz : {22050, 44100, 48000, 44101, 8000}) {
    const std::vector<int16_t> out = Resampled(Tone(1000, from_hz, from_hz), from_hz, 16000, 333);
    EXPECT_NEAR(MiddleRms(out), 10000 / std::sqrt(2.0), 100) << from_hz;
    // Its frequency: 1000 periods a second, two sign changes each.
    int changes = 0;
    for (size_t i = 1; i < out.size(); ++i) changes += (out[i - 1] < 0) != (out[i] < 0);
    EXPECT_NEAR(changes, 2000, 4) << from_hz;
  }
}

// A linear interpolation would fold a 10 kHz tone to 6 kHz, where speech is.
TEST(StreamResamplerTest, FiltersWhatLiesAboveTheNewNyquistFrequency) {
  for (int from_hz : {22050, 44100, 48000}) {
    const std::vector<int16_t> tone = Tone(10000, from_hz, from_hz);
    EXPECT_LT(MiddleRms(Resampled(tone, from_hz, 16000, 500)), 70) << from_hz;  // -40 dB
    EXPECT_GT(MiddleRms(Resample(tone, from_hz, 16000)), 3000) << from_hz;      // pcm.h's
  }
}

}  // namespace
}  // namespace omnistage
