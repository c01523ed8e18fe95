#include "gateway/audio/mp3_encoder.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "lame/lame.h"

namespace omnistage {
namespace {

constexpr int kBitrateKbps = 64;

bool IsMpegRate(int rate) {
  for (int r : {8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000}) {
    if (r == rate) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Mp3Encoder>> Mp3Encoder::Create(int sample_rate_hz) {
  if (!IsMpegRate(sample_rate_hz)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mp3: MPEG audio has no ", sample_rate_hz, " Hz rate"));
  }
  lame_global_flags* lame = lame_init();
  if (lame == nullptr) return absl::InternalError("mp3: cannot allocate an encoder");
  std::unique_ptr<Mp3Encoder> mp3(new Mp3Encoder(lame));
  lame_set_in_samplerate(lame, sample_rate_hz);
  lame_set_out_samplerate(lame, sample_rate_hz);
  lame_set_num_channels(lame, 1);
  lame_set_mode(lame, MONO);
  lame_set_VBR(lame, vbr_off);
  lame_set_brate(lame, kBitrateKbps);
  lame_set_bWriteVbrTag(lame, 0);
  if (lame_init_params(lame) < 0) {
    return absl::InternalError(absl::StrCat("mp3: LAME refused ", sample_rate_hz, " Hz"));
  }
  return mp3;
}

Mp3Encoder::~Mp3Encoder() { lame_close(lame_); }

absl::Status Mp3Encoder::Encode(absl::Span<const int16_t> samples, std::string* out) {
  if (finished_) return absl::FailedPreconditionError("mp3: encoded after the end");
  // LAME's worst case: 1.25 bytes per sample and 7,200 bytes.
  buffer_.resize(samples.size() * 5 / 4 + 7200);
  size_t done = 0;
  while (done < samples.size()) {
    // LAME takes an int count; large inputs go in parts.
    const int n = static_cast<int>(std::min<size_t>(samples.size() - done, 1 << 20));
    const int written = lame_encode_buffer(lame_, samples.data() + done, nullptr, n, buffer_.data(),
                                           static_cast<int>(buffer_.size()));
    if (written < 0) return absl::InternalError(absl::StrCat("mp3: LAME failed (", written, ")"));
    out->append(reinterpret_cast<const char*>(buffer_.data()), static_cast<size_t>(written));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status Mp3Encoder::Finish(std::string* out) {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  buffer_.resize(7200);
  const int written = lame_encode_flush(lame_, buffer_.data(), static_cast<int>(buffer_.size()));
  if (written < 0) return absl::InternalError(absl::StrCat("mp3: LAME failed (", written, ")"));
  out->append(reinterpret_cast<const char*>(buffer_.data()), static_cast<size_t>(written));
  return absl::OkStatus();
}

}  // namespace omnistage
