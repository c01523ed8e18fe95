#include "common/criticality.h"

#include <string>

#include "absl/strings/ascii.h"

namespace omnistage {

std::optional<v1::Criticality> ParseCriticality(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "critical") return v1::CRITICALITY_CRITICAL;
  if (lower == "standard") return v1::CRITICALITY_STANDARD;
  if (lower == "sheddable") return v1::CRITICALITY_SHEDDABLE;
  return std::nullopt;
}

const char* CriticalityName(v1::Criticality criticality) {
  switch (criticality) {
    case v1::CRITICALITY_CRITICAL:
      return "critical";
    case v1::CRITICALITY_STANDARD:
      return "standard";
    case v1::CRITICALITY_SHEDDABLE:
      return "sheddable";
    default:
      return "";
  }
}

}  // namespace omnistage
