// Modality names as configs, the CLI and logs spell them: "text", "audio", "tokens";
// finish reasons as metrics and logs spell them; and how long a chunk of audio
// plays.
#ifndef OMNISTAGE_COMMON_MODALITY_H_
#define OMNISTAGE_COMMON_MODALITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protos/common.pb.h"

namespace omnistage {

// "text", "audio" or "tokens" ("unspecified" for anything else).
std::string ModalityName(v1::Modality m);

// FINISH_REASON_STOP -> "stop" (the finish_reason label, the access line).
std::string FinishReasonName(v1::FinishReason reason);

// The inverse of ModalityName() for the three real modalities; INVALID_ARGUMENT
// "expected text, audio or tokens, got '<name>'" otherwise.
absl::StatusOr<v1::Modality> ParseModality(absl::string_view name);

// How long `audio` plays: its 16-bit frames over its sample rate (channels 0
// read as 1); 0 without a sample rate.
double AudioSecondsOf(const v1::AudioChunk& audio);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_MODALITY_H_
