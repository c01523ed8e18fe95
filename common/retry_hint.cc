#include "common/retry_hint.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

// The payload's type URL; its value is the milliseconds in decimal.
constexpr char kPayload[] = "omnistage.v1/retry_after_ms";

}  // namespace

absl::Status WithRetryAfter(absl::Status status, absl::Duration after) {
  const int64_t ms =
      std::max<int64_t>(1, absl::ToInt64Milliseconds(absl::Ceil(after, absl::Milliseconds(1))));
  status.SetPayload(kPayload, absl::Cord(absl::StrCat(ms)));
  return status;
}

std::optional<absl::Duration> RetryAfterOf(const absl::Status& status) {
  const auto payload = status.GetPayload(kPayload);
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms) || ms <= 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

}  // namespace omnistage
