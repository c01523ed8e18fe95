#include "orchestrator/core/stage_error.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/error_proto.h"

namespace omnistage {

v1::Error StageError(absl::StatusCode code, const StageConfig& stage, const StagePool& pool,
                     int replica, absl::string_view what) {
  std::string where = absl::StrCat("stage ", stage.id, " (", stage.name, ")");
  if (replica >= 0) absl::StrAppend(&where, " replica ", replica);
  if (code == absl::StatusCode::kOk) code = absl::StatusCode::kInternal;
  return ErrorProto(absl::Status(code, absl::StrCat(where, " ", what)), stage.id, replica,
                    replica >= 0 ? pool.state(replica).instance_id : "");
}

}  // namespace omnistage
