#include "gateway/http/forwarded_headers.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "common/bearer_token.h"
#include "common/tracing/trace_context.h"

namespace omnistage {

std::variant<ForwardedHeaders, ApiError> ForwardedHeadersOf(const HttpExchange& exchange) {
  absl::StatusOr<std::string> authorization = CleanAuthorization(exchange.Header("Authorization"));
  if (!authorization.ok()) {
    return FromStatus(absl::UnauthenticatedError(authorization.status().message()));
  }
  ForwardedHeaders forwarded{*std::move(authorization), exchange.Header("traceparent")};
  const std::string& traceparent = forwarded.traceparent;
  if (TraceIdOf(traceparent).empty() ||
      !std::all_of(traceparent.begin(), traceparent.end(),
                   [](char c) { return absl::ascii_isgraph(static_cast<unsigned char>(c)); })) {
    forwarded.traceparent.clear();
  }
  // Traced here: the orchestrator's span is the child of this request's.
  if (exchange.span().started()) forwarded.traceparent = exchange.span().context().Traceparent();
  return forwarded;
}

}  // namespace omnistage
