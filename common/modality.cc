#include "common/modality.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"

namespace omnistage {

std::string ModalityName(v1::Modality m) {
  switch (m) {
    case v1::MODALITY_TEXT:
      return "text";
    case v1::MODALITY_AUDIO:
      return "audio";
    case v1::MODALITY_TOKENS:
      return "tokens";
    default:
      return "unspecified";
  }
}

std::string FinishReasonName(v1::FinishReason reason) {
  const std::string name = v1::FinishReason_Name(reason);
  absl::string_view label = name;
  absl::ConsumePrefix(&label, "FINISH_REASON_");
  return absl::AsciiStrToLower(label);
}

absl::StatusOr<v1::Modality> ParseModality(absl::string_view name) {
  for (v1::Modality m : {v1::MODALITY_TEXT, v1::MODALITY_AUDIO, v1::MODALITY_TOKENS}) {
    if (name == ModalityName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("expected text, audio or tokens, got '", absl::CHexEscape(name), "'"));
}

double AudioSecondsOf(const v1::AudioChunk& audio) {
  if (audio.sample_rate_hz() <= 0) return 0;
  const int channels = audio.channels() <= 0 ? 1 : audio.channels();
  return static_cast<double>(audio.pcm_s16le().size()) / (2.0 * channels * audio.sample_rate_hz());
}

}  // namespace omnistage
