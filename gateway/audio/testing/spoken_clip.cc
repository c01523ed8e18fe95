#include "gateway/audio/testing/spoken_clip.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/pcm16.h"
#include "common/testing/child_process.h"
#include "gtest/gtest.h"

namespace omnistage {

const std::vector<int16_t>& SpokenClip::Spoken(const std::string& text) {
  static auto* const cache = new std::map<std::string, std::vector<int16_t>>();
  auto it = cache->find(text);
  if (it != cache->end()) return it->second;
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/", cache->size(), ".pcm");
  absl::StatusOr<std::unique_ptr<ChildProcess>> speaker =
      ChildProcess::Start({"stage_worker/engines/testing/speak_pcm", path, text});
  EXPECT_TRUE(speaker.ok()) << speaker.status();
  if (speaker.ok()) {
    EXPECT_EQ((*speaker)->Wait(absl::Seconds(30)), 0) << "speak_pcm: " << text;
  }
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<int16_t> all =
      MonoSamples(absl::string_view(bytes).substr(0, bytes.size() / 2 * 2), 1);
  size_t first = all.size(), last = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (std::abs(all[i]) <= kLoud) continue;
    first = std::min(first, i);
    last = i;
  }
  EXPECT_LT(first, last) << "speak_pcm said nothing: " << text;
  std::vector<int16_t> speech;
  if (first < last) speech.assign(all.begin() + first, all.begin() + last + 1);
  return cache->emplace(text, std::move(speech)).first->second;
}

SpokenClip& SpokenClip::Silence(int ms) {
  samples.resize(samples.size() + static_cast<size_t>(ms) * kSampleRateHz / 1000);
  return *this;
}

SpokenClip& SpokenClip::Say(const std::string& text) {
  const std::vector<int16_t>& speech = Spoken(text);
  onsets_ms.push_back(Ms(samples.size()));
  samples.insert(samples.end(), speech.begin(), speech.end());
  ends_ms.push_back(Ms(samples.size()));
  return *this;
}

SpokenClip& SpokenClip::Noise(double rms, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> gauss(0, rms);
  for (int16_t& s : samples) {
    s = static_cast<int16_t>(std::clamp(s + std::lround(gauss(rng)), -32768L, 32767L));
  }
  return *this;
}

std::string SpokenClip::Bytes() const {
  std::string bytes;
  AppendPcmS16le(samples, &bytes);
  return bytes;
}

}  // namespace omnistage
