// speak_pcm: a sentence as the Realtime API's input audio — espeak-ng's en-us
// voice with its Klatt variant (the accent the listener's pocketsphinx model
// knows, in the variant it hears best: docs/engines.md, "listener") resampled from
// its 22050 Hz to 24 kHz, 16-bit little-endian mono, with 300 ms of silence
// on either side (so the recognizer hears the utterance end). For the
// gateway's voice tests (realtime_voice_test.sh).
//
//   speak_pcm OUT.pcm "The quick brown fox jumps over the lazy dog."
//   speak_pcm --channel_mean      # that voice's mean, for the listener's cmn_init
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "stage_worker/engines/speech/espeak.h"
#include "stage_worker/engines/speech/resampler.h"
#include "stage_worker/engines/testing/test_speaker.h"

int main(int argc, char** argv) {
  // The listener's cmn_init for this speaker, for the test's pipeline config.
  if (argc == 2 && std::string(argv[1]) == "--channel_mean") {
    std::printf("%s\n", omnistage::kTestSpeakerChannelMean);
    return 0;
  }
  if (argc != 3) {
    std::fprintf(stderr, "usage: speak_pcm OUT.pcm TEXT | speak_pcm --channel_mean\n");
    return 2;
  }
  absl::StatusOr<omnistage::Espeak*> espeak = omnistage::Espeak::Get();
  if (!espeak.ok()) {
    std::fprintf(stderr, "speak_pcm: %s\n", espeak.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::vector<int16_t>> spoken =
      (*espeak)->Speak(argv[2], omnistage::kTestSpeakerVariant, omnistage::kTestSpeakerVoice);
  if (!spoken.ok()) {
    std::fprintf(stderr, "speak_pcm: %s\n", spoken.status().ToString().c_str());
    return 1;
  }
  const int rate = (*espeak)->sample_rate_hz();
  std::vector<int16_t> samples(static_cast<size_t>(rate * 3 / 10));
  samples.insert(samples.end(), spoken->begin(), spoken->end());
  samples.resize(samples.size() + static_cast<size_t>(rate * 3 / 10));
  omnistage::StreamResampler resampler(rate, 24000);
  std::vector<int16_t> out;
  resampler.Push(samples, &out);
  resampler.Flush(&out);
  std::string bytes;
  for (int16_t s : out) {  // Little-endian, whatever the host.
    bytes.push_back(static_cast<char>(static_cast<uint16_t>(s) & 0xff));
    bytes.push_back(static_cast<char>(static_cast<uint16_t>(s) >> 8));
  }
  std::ofstream file(argv[1], std::ios::binary);
  file << bytes;
  return file.good() ? 0 : 1;
}
