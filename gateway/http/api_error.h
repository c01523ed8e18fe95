// ApiError: an error as OpenAI's API reports it — an HTTP status and a body
// {"error": {"message", "type", "param", "code"}} — which the SDKs turn into
// their typed exceptions (BadRequestError, AuthenticationError, ...).
//
//   ApiError e = InvalidRequest("max_tokens", "Invalid type for 'max_tokens': ...");
//   exchange->Respond(e.http_status, "application/json", e.Json());
#ifndef OMNISTAGE_GATEWAY_HTTP_API_ERROR_H_
#define OMNISTAGE_GATEWAY_HTTP_API_ERROR_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace omnistage {

struct ApiError {
  int http_status = 500;
  // invalid_request_error, authentication_error, permission_error,
  // not_found_error, rate_limit_error, server_error.
  std::string type;
  std::string message;
  // The request field at fault ("" -> null).
  std::string param;
  // A machine-readable code ("" -> null), e.g. model_not_found.
  std::string code;
  // When the same request may be tried again (a full queue, a rate limit):
  // sent as `Retry-After` (whole seconds, rounded up) and `retry-after-ms`,
  // the headers OpenAI's SDKs wait by.
  std::optional<absl::Duration> retry_after;

  // The response headers the error adds: the retry ones, when there is a hint.
  std::vector<std::pair<std::string, std::string>> Headers() const;

  // {"error": {...}}.
  std::string Json() const;
};

// 400 invalid_request_error about `param`.
ApiError InvalidRequest(const std::string& param, const std::string& message,
                        const std::string& code = "");
// 404 unknown_url: "Invalid URL (<method> <path>)", as OpenAI answers a
// route it does not have.
ApiError UnknownUrl(const std::string& method, const std::string& path);
// 405 method_not_allowed: "<method> is not allowed on <path>; use <allowed>."
ApiError MethodNotAllowed(const std::string& method, const std::string& path,
                          const std::string& allowed);
// 404 unknown_url for a route this gateway was not started to serve:
// `message` says which flag serves it.
ApiError NotServed(const std::string& message);

// The HTTP status and type for an orchestrator's gRPC status: INVALID_ARGUMENT
// 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404,
// RESOURCE_EXHAUSTED 429, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, others 500;
// the message is the orchestrator's, and its retry hint (common/retry_hint.h)
// becomes `retry_after`.
ApiError FromStatus(const absl::Status& status);

// gRPC's message for an orchestrator it could not reach, with the fix added
// when it points to one: a plaintext dial a TLS orchestrator closed ("Socket
// closed": give --orchestrator_tls_ca), a certificate that does not chain to
// --orchestrator_tls_ca, a TLS dial to an orchestrator without TLS. `tls`:
// whether the gateway dials with TLS.
std::string ExplainUnreachable(const std::string& grpc_message, bool tls);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_API_ERROR_H_
