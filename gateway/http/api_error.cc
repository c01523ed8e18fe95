#include "gateway/http/api_error.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/retry_hint.h"
#include "nlohmann/json.hpp"

namespace omnistage {

std::string ApiError::Json() const {
  nlohmann::json error = {{"message", message}, {"type", type}};
  error["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  error["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  // A message may quote what the client sent (a model name, a form field):
  // bytes that are not UTF-8 become U+FFFD instead of failing the answer.
  return nlohmann::json({{"error", error}})
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

ApiError InvalidRequest(const std::string& param, const std::string& message,
                        const std::string& code) {
  return ApiError{400, "invalid_request_error", message, param, code, std::nullopt};
}

std::vector<std::pair<std::string, std::string>> ApiError::Headers() const {
  if (!retry_after.has_value()) return {};
  const int64_t ms = absl::ToInt64Milliseconds(*retry_after);
  return {{"Retry-After", absl::StrCat((ms + 999) / 1000)}, {"retry-after-ms", absl::StrCat(ms)}};
}

ApiError UnknownUrl(const std::string& method, const std::string& path) {
  return ApiError{
      404, "invalid_request_error", absl::StrCat("Invalid URL (", method, " ", path, ")"),
      "",  "unknown_url",           std::nullopt};
}

ApiError MethodNotAllowed(const std::string& method, const std::string& path,
                          const std::string& allowed) {
  return ApiError{405,
                  "invalid_request_error",
                  absl::StrCat(method, " is not allowed on ", path, "; use ", allowed, "."),
                  "",
                  "method_not_allowed",
                  std::nullopt};
}

ApiError NotServed(const std::string& message) {
  return ApiError{404, "invalid_request_error", message, "", "unknown_url", std::nullopt};
}

ApiError FromStatus(const absl::Status& status) {
  ApiError error;
  error.message = std::string(status.message());
  error.retry_after = RetryAfterOf(status);
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
      error.http_status = 400;
      error.type = "invalid_request_error";
      break;
    case absl::StatusCode::kUnauthenticated:
      error.http_status = 401;
      error.type = "authentication_error";
      error.code = "invalid_api_key";
      break;
    case absl::StatusCode::kPermissionDenied:
      error.http_status = 403;
      error.type = "permission_error";
      break;
    case absl::StatusCode::kNotFound:
      error.http_status = 404;
      error.type = "not_found_error";
      break;
    case absl::StatusCode::kResourceExhausted:
      error.http_status = 429;
      error.type = "rate_limit_error";
      error.code = "rate_limit_exceeded";
      break;
    case absl::StatusCode::kUnavailable:
      error.http_status = 503;
      error.type = "server_error";
      error.code = "service_unavailable";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      error.http_status = 504;
      error.type = "server_error";
      error.code = "timeout";
      break;
    default:
      error.http_status = 500;
      error.type = "server_error";
      break;
  }
  return error;
}

std::string ExplainUnreachable(const std::string& grpc_message, bool tls) {
  const char* fix = nullptr;
  if (!tls && absl::StrContains(grpc_message, "Socket closed")) {
    fix = "the orchestrator closes plaintext connections, so it may serve TLS: start the "
          "gateway with --orchestrator_tls_ca (the CA of its certificate)";
  } else if (tls && absl::StrContains(grpc_message, "certificate verify failed")) {
    fix = "the orchestrator's certificate does not chain to --orchestrator_tls_ca: give the CA "
          "that issued it";
  } else if (tls && absl::StrContains(grpc_message, "wrong version number")) {
    fix = "the orchestrator does not speak TLS: start the gateway without --orchestrator_tls_*";
  }
  return fix == nullptr ? grpc_message : absl::StrCat(grpc_message, " (", fix, ")");
}

}  // namespace omnistage
