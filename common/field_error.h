// Field paths on errors: which input field an INVALID_ARGUMENT is about, carried
// as a payload of the absl::Status, so that whoever passed the input on can name
// it in its own terms without reading the message.
//
//   // engine:        return AtField(InvalidArgumentError("expected 1..64"), "batch_size");
//   // stage worker:  status = AtField(status, "engine_params");   // engine_params.batch_size
//   // orchestrator:  ErrorField(status) -> "engine_params.batch_size", reported
//   //                as stages[1].engine_params.batch_size of the config file.
#ifndef OMNISTAGE_COMMON_FIELD_ERROR_H_
#define OMNISTAGE_COMMON_FIELD_ERROR_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace omnistage {

// `status` with `field` put in front of the field path it already carries
// ("a" then "b" gives "b.a"). OK stays OK.
absl::Status AtField(absl::Status status, absl::string_view field);

// The field path `status` carries; empty when it names none.
std::string ErrorField(const absl::Status& status);

// `status` with its message replaced by `message`, keeping its code and field
// path (for adding who or where to an error passed on).
absl::Status WithMessage(const absl::Status& status, absl::string_view message);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_FIELD_ERROR_H_
