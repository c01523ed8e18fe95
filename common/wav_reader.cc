#include "common/wav_reader.h"

#include <cstdint>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/limits.h"

namespace omnistage {
namespace {

uint32_t Le32(absl::string_view b, size_t at) {
  return static_cast<uint32_t>(static_cast<uint8_t>(b[at])) |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 1])) << 8 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 2])) << 16 |
         static_cast<uint32_t>(static_cast<uint8_t>(b[at + 3])) << 24;
}
uint16_t Le16(absl::string_view b, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(b[at]) |
                               static_cast<uint8_t>(b[at + 1]) << 8);
}

}  // namespace

absl::StatusOr<v1::AudioChunk> DecodeWav(absl::string_view bytes) {
  if (bytes.size() < 12 || bytes.substr(0, 4) != "RIFF" || bytes.substr(8, 4) != "WAVE") {
    return absl::InvalidArgumentError("not a WAV file (no RIFF/WAVE header)");
  }
  v1::AudioChunk audio;
  bool have_format = false;
  size_t at = 12;
  while (at + 8 <= bytes.size()) {
    const absl::string_view id = bytes.substr(at, 4);
    const uint32_t size = Le32(bytes, at + 4);
    at += 8;
    // A data chunk longer than the file is read to its end: a file written as
    // it streamed says an unknown length (wav_writer.h), and tools that stopped
    // early leave the one they meant.
    const size_t available = bytes.size() - at;
    if (size > available && id != "data") {
      return absl::InvalidArgumentError(
          absl::StrCat("the '", id, "' chunk says ", size, " bytes but ", available, " follow"));
    }
    const size_t length = size > available ? available : size;
    if (id == "fmt ") {
      if (length < 16) return absl::InvalidArgumentError("the fmt chunk is too short");
      const uint16_t format = Le16(bytes, at);
      const uint16_t channels = Le16(bytes, at + 2);
      const uint32_t rate = Le32(bytes, at + 4);
      const uint16_t bits = Le16(bytes, at + 14);
      if (format != 1 || bits != 16) {
        return absl::InvalidArgumentError(absl::StrCat(
            "not 16-bit PCM (format ", format, ", ", bits, " bits); convert it first, e.g. "
            "sox in.wav -b 16 -e signed-integer out.wav"));
      }
      if (channels < 1 || channels > kMaxAudioChannels || rate < kMinAudioSampleRateHz ||
          rate > static_cast<uint32_t>(kMaxAudioSampleRateHz)) {
        return absl::InvalidArgumentError(
            absl::StrCat(channels, " channel(s) at ", rate, " Hz is out of range"));
      }
      audio.set_channels(channels);
      audio.set_sample_rate_hz(static_cast<int32_t>(rate));
      have_format = true;
    } else if (id == "data") {
      if (!have_format) return absl::InvalidArgumentError("the data chunk comes before fmt");
      const size_t frame = 2 * static_cast<size_t>(audio.channels());
      audio.set_pcm_s16le(std::string(bytes.substr(at, length - length % frame)));
      return audio;
    }
    at += length + (length % 2);  // Chunks are padded to an even size.
  }
  return absl::InvalidArgumentError(have_format ? "no data chunk" : "no fmt chunk");
}

absl::StatusOr<v1::AudioChunk> ReadWav(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream content;
  content << in.rdbuf();
  absl::StatusOr<v1::AudioChunk> audio = DecodeWav(content.str());
  if (!audio.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", audio.status().message()));
  return audio;
}

}  // namespace omnistage
