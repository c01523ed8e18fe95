#include "gateway/http/forwarded_headers.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "common/bearer_token.h"
#include "common/tracing/trace_context.h"

namespace omnistage {
namespace {

// What gRPC metadata can carry of a traceparent: visible ASCII.
bool Visible(const std::string& value) {
  return std::all_of(value.begin(), value.end(),
                     [](char c) { return absl::ascii_isgraph(static_cast<unsigned char>(c)); });
}

}  // namespace

std::variant<ForwardedHeaders, ApiError> ForwardedHeadersOf(const HttpExchange& exchange) {
  absl::StatusOr<std::string> authorization = CleanAuthorization(exchange.Header("Authorization"));
  if (!authorization.ok()) {
    return FromStatus(absl::UnauthenticatedError(authorization.status().message()));
  }
  ForwardedHeaders forwarded{*std::move(authorization), {}};
  // Traced here: the orchestrator's span is the child of this request's.
  if (exchange.span().started()) {
    const TraceContext& context = exchange.span().context();
    forwarded.trace = {context.Traceparent(), context.trace_state};
    return forwarded;
  }
  // Not traced: the client's, as it came (the tracestate as Parse keeps it).
  const std::string& traceparent = exchange.Header("traceparent");
  std::optional<TraceContext> client =
      TraceContext::Parse(traceparent, exchange.Header("tracestate"));
  if (client.has_value() && Visible(traceparent)) {
    forwarded.trace = {traceparent, client->trace_state};
  }
  return forwarded;
}

}  // namespace omnistage
