// DecodeAudioFile: an uploaded audio file (the "file" of
// /v1/audio/transcriptions), whole in memory, decoded by libsndfile to 16-bit
// mono at the file's own rate, for a recogniser that takes 8 to 384 kHz. It
// reads wav, flac, ogg (opus, vorbis) and mp3 (libsndfile's other formats
// too: aiff, au, caf, ...) straight from the bytes, with no temporary file.
//
//   absl::StatusOr<DecodedAudio> audio = DecodeAudioFile(body, 1500);
//   if (!audio.ok()) return audio.status();   // INVALID_ARGUMENT: a 400
//   Recognise(audio->mono, audio->sample_rate_hz);
//
// Every refusal is INVALID_ARGUMENT with a message for the client: not audio
// (the formats read, and what libsndfile said), cut short ("truncated": a wav,
// aiff or flac whose header promises more samples than it holds), no samples,
// a rate or channel count the recogniser does not take, or longer than the
// limit. A file over the limit is refused as soon as that is known (from its
// header, or when the decoding passes the limit), not after decoding it all.
//
// An mp3's exact length is in its LAME or Xing tag. Without one, libsndfile
// estimates the length from the file's size: a constant-bitrate file then
// decodes with the encoder's delay and the last frame's padding (tens of
// milliseconds more than was encoded), and a variable-bitrate one stops where
// the estimate ends.
//
// Thread-safe: each call has its own decoder.
#ifndef OMNISTAGE_GATEWAY_AUDIO_AUDIO_DECODER_H_
#define OMNISTAGE_GATEWAY_AUDIO_AUDIO_DECODER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace omnistage {

struct DecodedAudio {
  // 16-bit samples, the channels mixed down to one (their average).
  std::vector<int16_t> mono;
  // The file's rate and channel count.
  int sample_rate_hz = 0;
  int channels = 0;
  // What the file was, for logs and errors: "wav", "flac", "ogg", "mp3", "aiff", ...
  std::string format;

  // mono's length in seconds.
  double seconds() const;
};

// Decodes the whole audio file in `bytes`; at most `max_seconds` of audio.
absl::StatusOr<DecodedAudio> DecodeAudioFile(absl::string_view bytes, double max_seconds);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_AUDIO_AUDIO_DECODER_H_
