// A refusal's hint of when to try again. Inside a process it rides on the
// absl::Status of the refusal; on the wire it is v1::Error.retry_after_ms (a
// terminal's error), google.rpc.RetryInfo in the call's status details and a
// `retry-after-ms` trailer (a refused call, common/grpc/grpc_util.h), and HTTP
// `Retry-After` / `retry-after-ms` headers at the gateway.
//
//   return WithRetryAfter(absl::ResourceExhaustedError("the queue is full"),
//                         absl::Seconds(1));
//   if (std::optional<absl::Duration> after = RetryAfterOf(status)) ...
//
// Thread-safe (no state).
#ifndef OMNISTAGE_COMMON_RETRY_HINT_H_
#define OMNISTAGE_COMMON_RETRY_HINT_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace omnistage {

// The metadata key of the hint on a refused gRPC call, in milliseconds.
inline constexpr char kRetryAfterMsTrailer[] = "retry-after-ms";

// `status` (not OK) carrying `after` (rounded up to whole milliseconds, at
// least 1).
absl::Status WithRetryAfter(absl::Status status, absl::Duration after);

// A refusal of the moment: `code` with "<why>; retry after N ms" and the
// hint (N: `after` rounded up to whole milliseconds).
absl::Status RetryLater(absl::StatusCode code, absl::string_view why, absl::Duration after);

// The hint `status` carries; nullopt when none.
std::optional<absl::Duration> RetryAfterOf(const absl::Status& status);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_RETRY_HINT_H_
