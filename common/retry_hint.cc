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

// `after` in whole milliseconds, rounded up, at least 1.
int64_t WholeMilliseconds(absl::Duration after) {
  return std::max<int64_t>(1,
                           absl::ToInt64Milliseconds(absl::Ceil(after, absl::Milliseconds(1))));
}

}  // namespace

absl::Status WithRetryAfter(absl::Status status, absl::Duration after) {
  status.SetPayload(kPayload, absl::Cord(absl::StrCat(WholeMilliseconds(after))));
  return status;
}

absl::Status RetryLater(absl::StatusCode code, absl::string_view why, absl::Duration after) {
  return WithRetryAfter(
      absl::Status(code, absl::StrCat(why, "; retry after ", WholeMilliseconds(after), " ms")),
      after);
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
