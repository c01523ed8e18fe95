// Modality names as configs, the CLI and logs spell them: "text", "audio", "tokens".
#ifndef OMNISTAGE_COMMON_MODALITY_H_
#define OMNISTAGE_COMMON_MODALITY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protos/common.pb.h"

namespace omnistage {

// "text", "audio" or "tokens" ("unspecified" for anything else).
std::string ModalityName(v1::Modality m);

// The inverse of ModalityName() for the three real modalities; INVALID_ARGUMENT
// "expected text, audio or tokens, got '<name>'" otherwise.
absl::StatusOr<v1::Modality> ParseModality(absl::string_view name);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_MODALITY_H_
