#include "common/field_error.h"

#include "absl/types/optional.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

constexpr absl::string_view kFieldPayload = "type.omnistage.dev/field_path";

}  // namespace

absl::Status AtField(absl::Status status, absl::string_view field) {
  if (status.ok() || field.empty()) return status;
  const std::string inner = ErrorField(status);
  status.SetPayload(kFieldPayload,
                    absl::Cord(inner.empty() ? std::string(field) : absl::StrCat(field, ".", inner)));
  return status;
}

std::string ErrorField(const absl::Status& status) {
  absl::optional<absl::Cord> field = status.GetPayload(kFieldPayload);
  return field.has_value() ? std::string(*field) : std::string();
}

absl::Status WithMessage(const absl::Status& status, absl::string_view message) {
  return AtField(absl::Status(status.code(), message), ErrorField(status));
}

}  // namespace omnistage
