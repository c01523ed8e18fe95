#include "common/wav_writer.h"

#include <cstdint>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

void PutLE(std::string* out, uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

}  // namespace

absl::Status WavWriter::Append(const v1::AudioChunk& chunk) {
  const int channels = chunk.channels() == 0 ? 1 : chunk.channels();
  if (chunk.sample_rate_hz() <= 0) {
    return absl::InvalidArgumentError("audio chunk without a sample rate");
  }
  if (sample_rate_hz_ == 0) {
    sample_rate_hz_ = chunk.sample_rate_hz();
    channels_ = channels;
  } else if (chunk.sample_rate_hz() != sample_rate_hz_ || channels != channels_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "audio chunk at ", chunk.sample_rate_hz(), " Hz x ", channels, " after ",
        sample_rate_hz_, " Hz x ", channels_));
  }
  if (chunk.pcm_s16le().size() % (2 * channels) != 0) {
    return absl::InvalidArgumentError("audio chunk is not whole 16-bit frames");
  }
  pcm_ += chunk.pcm_s16le();
  return absl::OkStatus();
}

double WavWriter::seconds() const {
  if (sample_rate_hz_ == 0) return 0;
  return static_cast<double>(pcm_.size()) / (2.0 * channels_ * sample_rate_hz_);
}

std::string WavHeader(int sample_rate_hz, int channels, int64_t data_bytes) {
  const int rate = sample_rate_hz <= 0 ? 24000 : sample_rate_hz;
  channels = channels <= 0 ? 1 : channels;
  // A stream's length is not known when its header goes out: the largest sizes
  // say "to the end", as streaming WAV writers do.
  const uint32_t data = data_bytes < 0 ? 0xffffffffu - 36 : static_cast<uint32_t>(data_bytes);
  std::string out = "RIFF";
  PutLE(&out, data + 36, 4);
  out += "WAVEfmt ";
  PutLE(&out, 16, 4);                         // fmt chunk size
  PutLE(&out, 1, 2);                          // PCM
  PutLE(&out, channels, 2);
  PutLE(&out, rate, 4);
  PutLE(&out, rate * channels * 2, 4);        // byte rate
  PutLE(&out, channels * 2, 2);               // block align
  PutLE(&out, 16, 2);                         // bits per sample
  out += "data";
  PutLE(&out, data, 4);
  return out;
}

std::string WavWriter::Encode() const {
  return WavHeader(sample_rate_hz_, channels_, static_cast<int64_t>(pcm_.size())) + pcm_;
}

absl::Status WavWriter::Save(const std::string& path) const {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  const std::string bytes = Encode();
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!file) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace omnistage
