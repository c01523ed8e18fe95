// WavWriter: writes 16-bit PCM audio chunks to a .wav file as they arrive.
//
//   WavWriter wav;
//   wav.Append(chunk);            // AudioChunk from a GenerateResponse
//   absl::Status s = wav.Save("out.wav");
//   std::string streamed = WavHeader(24000, 1, -1);   // then the PCM as it comes
#ifndef OMNISTAGE_COMMON_WAV_WRITER_H_
#define OMNISTAGE_COMMON_WAV_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "protos/common.pb.h"

namespace omnistage {

class WavWriter {
 public:
  // Adds a chunk. The first chunk fixes the sample rate and channel count; a
  // chunk that disagrees is an error (and is not added).
  absl::Status Append(const v1::AudioChunk& chunk);
  // Writes a RIFF/WAVE file with what was appended.
  absl::Status Save(const std::string& path) const;
  // The file's bytes (header + samples).
  std::string Encode() const;

  double seconds() const;
  int sample_rate_hz() const { return sample_rate_hz_; }
  size_t bytes() const { return pcm_.size(); }

 private:
  std::string pcm_;
  int sample_rate_hz_ = 0;
  int channels_ = 0;
};

// The 44-byte RIFF/WAVE header of 16-bit PCM: `data_bytes` of samples, or
// (when negative) an unknown length, for audio streamed as it is made.
std::string WavHeader(int sample_rate_hz, int channels, int64_t data_bytes);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_WAV_WRITER_H_
