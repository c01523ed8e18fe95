// Gateway's /console routes (docs/console.md): the live console's page and
// files, built into the binary (console/assets.h), which anyone may load — they
// hold no data — and /console/status, which the page polls with the token it
// was given: the token goes to the orchestrator's GetPipelineStatus as a chat
// completion's goes to its Generate, so with tokens on only an admin's is
// answered (a user's is PERMISSION_DENIED: 403; none or an unknown one,
// UNAUTHENTICATED: 401), and without tokens anyone's is.
#include <chrono>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/bearer_token.h"
#include "common/grpc/grpc_util.h"
#include "gateway/console/assets.h"
#include "gateway/console/console_status.h"
#include "gateway/gateway.h"
#include "gateway/http/api_error.h"

namespace omnistage {
namespace {

constexpr char kPageRoute[] = "/console";
constexpr std::string_view kFilesPrefix = "/console/";
constexpr char kStatusRoute[] = "/console/status";
// What the page may load and run: its own files and fetches, and the audio
// it builds (a blob: URL, played and read back).
constexpr char kPagePolicy[] =
    "default-src 'self'; media-src 'self' blob:; connect-src 'self' blob:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'";
constexpr std::chrono::seconds kStatusDeadline{5};

}  // namespace

void Gateway::Console(std::shared_ptr<HttpExchange> exchange) {
  const std::string& path = exchange->path();
  if (path == kStatusRoute) {
    ConsoleStatus(std::move(exchange));
    return;
  }
  // "/console", "/console/": the page; "/console/NAME": the file NAME.
  std::string_view name = path;
  if (name.compare(0, kFilesPrefix.size(), kFilesPrefix) == 0) {
    name.remove_prefix(kFilesPrefix.size());
  } else {
    name = "";
  }
  if (name.empty()) name = "console.html";
  const ConsoleAsset* asset = FindConsoleAsset(name);
  if (asset == nullptr) {
    Refuse(*exchange, "other",
           ApiError{404, "invalid_request_error",
                    absl::StrCat("Invalid URL (", exchange->method(), " ", path, ")"), "",
                    "unknown_url", std::nullopt});
    return;
  }
  // A new binary may bring new files: asked again each time, never stale.
  exchange->AddHeader("Cache-Control", "no-cache");
  exchange->AddHeader("X-Content-Type-Options", "nosniff");
  exchange->AddHeader("Content-Security-Policy", kPagePolicy);
  exchange->Respond(200, std::string(asset->content_type), std::string(asset->body));
  Count(kPageRoute, 200);
}

void Gateway::ConsoleStatus(std::shared_ptr<HttpExchange> exchange) {
  absl::StatusOr<std::string> authorization = CleanAuthorization(exchange->Header("Authorization"));
  if (!authorization.ok()) {
    Refuse(*exchange, kStatusRoute,
           ApiError{401, "authentication_error", std::string(authorization.status().message()), "",
                    "invalid_api_key", std::nullopt});
    return;
  }
  AskPipelineStatus(
      any_stub_.get(), *authorization, kStatusDeadline,
      [this, exchange](const grpc::Status& status, const v1::PipelineStatus& pipeline) {
        if (exchange->done()) return;  // The page went away.
        if (!status.ok()) {
          absl::Status failed = FromGrpcStatus(status);
          if (failed.code() == absl::StatusCode::kUnavailable) {
            failed = absl::UnavailableError(ExplainUnreachable(
                std::string(failed.message()), options_.orchestrator_tls.enabled()));
          }
          Refuse(*exchange, kStatusRoute, FromStatus(failed));
          return;
        }
        exchange->AddHeader("Cache-Control", "no-store");
        exchange->Respond(200, "application/json", ConsoleStatusJson(pipeline, served_));
        Count(kStatusRoute, 200);
      });
}

void Gateway::Served(const CallOutcome& outcome, absl::Time started) {
  const absl::Time now = absl::Now();
  served_.Add({outcome.request_id, outcome.outcome, outcome.error, outcome.http_status,
               absl::ToDoubleSeconds(now - started), absl::ToUnixMillis(now)});
}

}  // namespace omnistage
