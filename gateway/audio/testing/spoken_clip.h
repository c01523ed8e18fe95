// Test audio for the voice activity detectors: sentences spoken by espeak-ng
// (speak_pcm: en-us, Klatt variant, 24 kHz 16-bit mono), cut to where the
// speech truly is (its first and last sample above |kLoud|), laid out between
// silences and noise by a SpokenClip that remembers where each sentence lies.
// The test must list //stage_worker/engines/testing:speak_pcm in its data.
//
//   SpokenClip clip;
//   clip.Silence(1000).Say("The quick brown fox.").Silence(1500).Noise(300, 7);
//   // clip.samples; clip.onsets_ms[0], clip.ends_ms[0]
#ifndef OMNISTAGE_GATEWAY_AUDIO_TESTING_SPOKEN_CLIP_H_
#define OMNISTAGE_GATEWAY_AUDIO_TESTING_SPOKEN_CLIP_H_

#include <cstdint>
#include <string>
#include <vector>

namespace omnistage {

class SpokenClip {
 public:
  static constexpr int kSampleRateHz = 24000;
  // The truth: speech is where samples pass |kLoud|.
  static constexpr int kLoud = 500;

  // speak_pcm's `text`, from its first sample above |kLoud| to its last
  // (spoken once per test process).
  static const std::vector<int16_t>& Spoken(const std::string& text);
  // Milliseconds of `samples` samples.
  static int64_t Ms(size_t samples) { return static_cast<int64_t>(samples) * 1000 / kSampleRateHz; }

  SpokenClip& Silence(int ms);
  SpokenClip& Say(const std::string& text);
  // Gaussian noise of RMS `rms` added over everything so far.
  SpokenClip& Noise(double rms, uint32_t seed);
  // The samples as little-endian bytes (the Realtime API's audio/pcm).
  std::string Bytes() const;

  std::vector<int16_t> samples;
  std::vector<int64_t> onsets_ms, ends_ms;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_TESTING_SPOKEN_CLIP_H_
