#include "common/tracing/testing/span_fields.h"

#include "absl/strings/str_cat.h"

namespace omnistage {

std::string AttributeOf(const opentelemetry::proto::trace::v1::Span& span, const std::string& key) {
  for (const auto& attribute : span.attributes()) {
    if (attribute.key() != key) continue;
    const auto& value = attribute.value();
    if (value.has_int_value()) return absl::StrCat(value.int_value());
    if (value.has_double_value()) return absl::StrCat(value.double_value());
    if (value.has_bool_value()) return value.bool_value() ? "true" : "false";
    return value.string_value();
  }
  return "";
}

std::vector<std::string> EventNamesOf(const opentelemetry::proto::trace::v1::Span& span) {
  std::vector<std::string> names;
  for (const auto& event : span.events()) names.push_back(event.name());
  return names;
}

}  // namespace omnistage
