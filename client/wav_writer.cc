#include "client/wav_writer.h"

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

std::string WavWriter::Encode() const {
  const int rate = sample_rate_hz_ == 0 ? 24000 : sample_rate_hz_;
  const int channels = channels_ == 0 ? 1 : channels_;
  std::string out = "RIFF";
  PutLE(&out, static_cast<uint32_t>(36 + pcm_.size()), 4);
  out += "WAVEfmt ";
  PutLE(&out, 16, 4);                         // fmt chunk size
  PutLE(&out, 1, 2);                          // PCM
  PutLE(&out, channels, 2);
  PutLE(&out, rate, 4);
  PutLE(&out, rate * channels * 2, 4);        // byte rate
  PutLE(&out, channels * 2, 2);               // block align
  PutLE(&out, 16, 2);                         // bits per sample
  out += "data";
  PutLE(&out, static_cast<uint32_t>(pcm_.size()), 4);
  out += pcm_;
  return out;
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
