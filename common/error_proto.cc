#include "common/error_proto.h"

#include <string>

#include "common/field_error.h"
#include "common/retry_hint.h"

namespace omnistage {

v1::Error ErrorProto(const absl::Status& status, int stage, int replica,
                     absl::string_view instance_id) {
  v1::Error error;
  error.set_code(static_cast<int>(status.code()));
  error.set_message(std::string(status.message()));
  error.set_stage_id(stage);
  error.set_replica(replica);
  error.set_instance_id(std::string(instance_id));
  error.set_field(ErrorField(status));
  if (std::optional<absl::Duration> after = RetryAfterOf(status)) {
    error.set_retry_after_ms(absl::ToInt64Milliseconds(*after));
  }
  return error;
}

absl::Status StatusFromErrorProto(const v1::Error& error) {
  absl::StatusCode code = static_cast<absl::StatusCode>(error.code());
  if (error.code() <= 0 || error.code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    code = absl::StatusCode::kInternal;
  }
  absl::Status status = AtField(absl::Status(code, error.message()), error.field());
  if (error.retry_after_ms() > 0) {
    status = WithRetryAfter(std::move(status), absl::Milliseconds(error.retry_after_ms()));
  }
  return status;
}

}  // namespace omnistage
