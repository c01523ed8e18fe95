#include "gateway/audio/flac_encoder.h"

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

FLAC__StreamEncoderWriteStatus WriteToString(const FLAC__StreamEncoder*, const FLAC__byte buffer[],
                                             size_t bytes, uint32_t /*samples*/,
                                             uint32_t /*current_frame*/, void* client) {
  static_cast<FlacEncoder*>(client)->Write(buffer, bytes);
  return FLAC__STREAM_ENCODER_WRITE_STATUS_OK;
}

}  // namespace

FlacEncoder::FlacEncoder() : encoder_(FLAC__stream_encoder_new()) {}

FlacEncoder::~FlacEncoder() {
  if (encoder_ == nullptr) return;
  if (!finished_) {
    std::string discarded;
    out_ = &discarded;
    FLAC__stream_encoder_finish(encoder_);
  }
  FLAC__stream_encoder_delete(encoder_);
}

absl::StatusOr<std::unique_ptr<FlacEncoder>> FlacEncoder::Create(int sample_rate_hz) {
  std::unique_ptr<FlacEncoder> flac(new FlacEncoder());
  FLAC__StreamEncoder* e = flac->encoder_;
  if (e == nullptr) return absl::InternalError("flac: cannot allocate an encoder");
  bool ok = FLAC__stream_encoder_set_channels(e, 1) &&
            FLAC__stream_encoder_set_bits_per_sample(e, 16) &&
            FLAC__stream_encoder_set_sample_rate(e, static_cast<uint32_t>(sample_rate_hz)) &&
            FLAC__stream_encoder_set_compression_level(e, 5) &&
            FLAC__stream_encoder_set_streamable_subset(e, true);
  if (!ok) return absl::InternalError("flac: the encoder refused its settings");
  flac->out_ = &flac->pending_;
  const FLAC__StreamEncoderInitStatus init = FLAC__stream_encoder_init_stream(
      e, WriteToString, /*seek=*/nullptr, /*tell=*/nullptr, /*metadata=*/nullptr, flac.get());
  if (init != FLAC__STREAM_ENCODER_INIT_STATUS_OK) {
    return absl::InternalError(absl::StrCat("flac: cannot encode at ", sample_rate_hz,
                                            " Hz: ", FLAC__StreamEncoderInitStatusString[init]));
  }
  return flac;
}

absl::Status FlacEncoder::Encode(absl::Span<const int16_t> samples, std::string* out) {
  if (finished_) return absl::FailedPreconditionError("flac: encoded after the end");
  out->append(pending_);
  pending_.clear();
  widened_.assign(samples.begin(), samples.end());
  out_ = out;
  const bool ok =
      widened_.empty() || FLAC__stream_encoder_process_interleaved(
                              encoder_, widened_.data(), static_cast<uint32_t>(widened_.size()));
  out_ = &pending_;
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("flac: ", FLAC__stream_encoder_get_resolved_state_string(encoder_)));
  }
  return absl::OkStatus();
}

absl::Status FlacEncoder::Finish(std::string* out) {
  if (finished_) return absl::OkStatus();
  out->append(pending_);
  pending_.clear();
  out_ = out;
  const bool ok = FLAC__stream_encoder_finish(encoder_);
  out_ = &pending_;
  finished_ = true;
  if (!ok) {
    return absl::InternalError(
        absl::StrCat("flac: ", FLAC__stream_encoder_get_resolved_state_string(encoder_)));
  }
  return absl::OkStatus();
}

}  // namespace omnistage
