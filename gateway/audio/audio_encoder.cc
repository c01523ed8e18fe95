#include "gateway/audio/audio_encoder.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gateway/audio/flac_encoder.h"
#include "gateway/audio/mp3_encoder.h"
#include "gateway/audio/opus_encoder.h"
#include "gateway/audio/pcm_encoder.h"
#include "gateway/audio/wav_stream_encoder.h"

namespace omnistage {

const std::vector<std::string>& ServedAudioFormats() {
  static const auto* formats = new std::vector<std::string>{"mp3", "opus", "flac", "wav", "pcm"};
  return *formats;
}

absl::StatusOr<std::unique_ptr<AudioEncoder>> MakeAudioEncoder(absl::string_view format,
                                                               int sample_rate_hz) {
  if (format == "mp3") return Mp3Encoder::Create(sample_rate_hz);
  if (format == "opus") return OpusEncoder::Create(sample_rate_hz);
  if (format == "flac") return FlacEncoder::Create(sample_rate_hz);
  if (format == "wav") return std::make_unique<WavStreamEncoder>(sample_rate_hz);
  if (format == "pcm") return std::make_unique<PcmEncoder>();
  return absl::InvalidArgumentError(absl::StrCat("'", format, "' is not a format this server ",
                                                 "makes; it makes ",
                                                 absl::StrJoin(ServedAudioFormats(), ", ")));
}

}  // namespace omnistage
