// ResampleMono keeps what is below the new rate's Nyquist frequency, removes
// what is above it, and gives the length the rates say.
#include "gateway/audio/audio_resampler.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace omnistage {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::vector<int16_t> Sine(double hz, int rate_hz, double seconds) {
  std::vector<int16_t> samples(static_cast<size_t>(rate_hz * seconds));
  for (size_t i = 0; i < samples.size(); ++i) {
    samples[i] = static_cast<int16_t>(10000 * std::sin(2 * kPi * hz * i / rate_hz));
  }
  return samples;
}

// Root mean square of the middle half (no edge effects).
double Rms(const std::vector<int16_t>& samples) {
  double sum = 0;
  const size_t from = samples.size() / 4, to = samples.size() * 3 / 4;
  for (size_t i = from; i < to; ++i) sum += static_cast<double>(samples[i]) * samples[i];
  return std::sqrt(sum / static_cast<double>(to - from));
}

// Upward zero crossings in the middle half, per second.
double Frequency(const std::vector<int16_t>& samples, int rate_hz) {
  int crossings = 0;
  const size_t from = samples.size() / 4, to = samples.size() * 3 / 4;
  for (size_t i = from + 1; i < to; ++i) crossings += samples[i - 1] < 0 && samples[i] >= 0;
  return crossings * static_cast<double>(rate_hz) / static_cast<double>(to - from);
}

TEST(AudioResamplerTest, KeepsWhatTheNewRateHolds) {
  for (int from : {44100, 48000, 22050, 8000}) {
    const std::vector<int16_t> tone = Sine(440, from, 2.0);
    absl::StatusOr<std::vector<int16_t>> out = ResampleMono(tone, from, 16000);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR(static_cast<double>(out->size()), 32000, 2) << from;
    EXPECT_NEAR(Frequency(*out, 16000), 440, 5) << from;
    EXPECT_NEAR(Rms(*out), Rms(tone), Rms(tone) * 0.02) << from;
  }
}

TEST(AudioResamplerTest, RemovesWhatWouldAlias) {
  // 10 kHz is above 16 kHz's Nyquist frequency: kept, it would fold to 6 kHz.
  const std::vector<int16_t> tone = Sine(10000, 44100, 1.0);
  absl::StatusOr<std::vector<int16_t>> out = ResampleMono(tone, 44100, 16000);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_LT(Rms(*out), Rms(tone) * 0.001);
}

// The same audio resampled twice is the same samples (no random dither).
TEST(AudioResamplerTest, Deterministic) {
  const std::vector<int16_t> tone = Sine(440, 44100, 0.5);
  EXPECT_EQ(*ResampleMono(tone, 44100, 16000), *ResampleMono(tone, 44100, 16000));
}

TEST(AudioResamplerTest, SameRateAndBadRates) {
  const std::vector<int16_t> tone = Sine(440, 16000, 0.1);
  absl::StatusOr<std::vector<int16_t>> same = ResampleMono(tone, 16000, 16000);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, tone);
  EXPECT_TRUE(ResampleMono({}, 44100, 16000).ok());
  EXPECT_EQ(ResampleMono(tone, 0, 16000).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace omnistage
