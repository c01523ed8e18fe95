#include "gateway/audio/pcm_encoder.h"

#include "common/pcm16.h"

namespace omnistage {

absl::Status PcmEncoder::Encode(absl::Span<const int16_t> samples, std::string* out) {
  AppendPcmS16le(samples, out);
  return absl::OkStatus();
}

}  // namespace omnistage
