#include "gateway/audio/opus_encoder.h"

#include <opusenc.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

constexpr int kBitrate = 32000;
// In 48 kHz samples: 100 ms.
constexpr int kDelay = 4800;

}  // namespace

absl::StatusOr<std::unique_ptr<OpusEncoder>> OpusEncoder::Create(int sample_rate_hz) {
  OggOpusComments* comments = ope_comments_create();
  if (comments == nullptr) return absl::InternalError("opus: cannot allocate comments");
  ope_comments_add(comments, "ENCODER", "omnistage");
  int error = OPE_OK;
  OggOpusEnc* encoder = ope_encoder_create_pull(comments, sample_rate_hz, 1, 0, &error);
  if (encoder == nullptr) {
    ope_comments_destroy(comments);
    return absl::InternalError(
        absl::StrCat("opus: cannot encode at ", sample_rate_hz, " Hz: ", ope_strerror(error)));
  }
  std::unique_ptr<OpusEncoder> opus(new OpusEncoder(comments, encoder));
  if (ope_encoder_ctl(encoder, OPUS_SET_BITRATE(kBitrate)) != OPE_OK ||
      ope_encoder_ctl(encoder, OPE_SET_MUXING_DELAY(kDelay)) != OPE_OK ||
      ope_encoder_ctl(encoder, OPE_SET_DECISION_DELAY(kDelay)) != OPE_OK) {
    return absl::InternalError("opus: the encoder refused its settings");
  }
  return opus;
}

OpusEncoder::~OpusEncoder() {
  ope_encoder_destroy(encoder_);
  ope_comments_destroy(comments_);
}

void OpusEncoder::TakePages(bool flush, std::string* out) {
  unsigned char* page = nullptr;
  opus_int32 length = 0;
  while (ope_encoder_get_page(encoder_, &page, &length, flush ? 1 : 0) == 1) {
    out->append(reinterpret_cast<const char*>(page), static_cast<size_t>(length));
  }
}

absl::Status OpusEncoder::Encode(absl::Span<const int16_t> samples, std::string* out) {
  if (finished_) return absl::FailedPreconditionError("opus: encoded after the end");
  size_t done = 0;
  while (done < samples.size()) {
    const int n = static_cast<int>(std::min<size_t>(samples.size() - done, 1 << 20));
    if (const int error = ope_encoder_write(encoder_, samples.data() + done, n); error != OPE_OK) {
      return absl::InternalError(absl::StrCat("opus: ", ope_strerror(error)));
    }
    done += static_cast<size_t>(n);
  }
  TakePages(/*flush=*/false, out);
  return absl::OkStatus();
}

absl::Status OpusEncoder::Finish(std::string* out) {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  if (const int error = ope_encoder_drain(encoder_); error != OPE_OK) {
    return absl::InternalError(absl::StrCat("opus: ", ope_strerror(error)));
  }
  TakePages(/*flush=*/true, out);
  return absl::OkStatus();
}

}  // namespace omnistage
