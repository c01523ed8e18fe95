#include "common/error_proto.h"

#include <string>

#include "common/field_error.h"

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
  return error;
}

absl::Status StatusFromErrorProto(const v1::Error& error) {
  absl::StatusCode code = static_cast<absl::StatusCode>(error.code());
  if (error.code() <= 0 || error.code() > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    code = absl::StatusCode::kInternal;
  }
  return AtField(absl::Status(code, error.message()), error.field());
}

}  // namespace omnistage
