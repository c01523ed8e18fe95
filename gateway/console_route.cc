#include "gateway/console_route.h"

#include <chrono>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gateway/batch/batch_store.h"
#include "gateway/console/assets.h"
#include "gateway/console/console_status.h"
#include "gateway/http/api_error.h"
#include "gateway/http/forwarded_headers.h"

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

ConsoleRoute::ConsoleRoute(Orchestrators* orchestrators, RouteReplies* replies, StoreThread* store,
                           LoopPoster post)
    : orchestrators_(orchestrators), replies_(replies), store_(store), post_(std::move(post)) {}

void ConsoleRoute::Handle(std::shared_ptr<HttpExchange> exchange) {
  const std::string& path = exchange->path();
  if (path == kStatusRoute) {
    Status(std::move(exchange));
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
    replies_->Refuse(*exchange, "other", UnknownUrl(exchange->method(), path));
    return;
  }
  // A new binary may bring new files: asked again each time, never stale.
  exchange->AddHeader("Cache-Control", "no-cache");
  exchange->AddHeader("X-Content-Type-Options", "nosniff");
  exchange->AddHeader("Content-Security-Policy", kPagePolicy);
  exchange->Respond(200, std::string(asset->content_type), std::string(asset->body));
  replies_->Count(kPageRoute, 200);
}

void ConsoleRoute::Status(std::shared_ptr<HttpExchange> exchange) {
  std::variant<ForwardedHeaders, ApiError> forwarded = ForwardedHeadersOf(*exchange);
  if (std::holds_alternative<ApiError>(forwarded)) {
    replies_->Refuse(*exchange, kStatusRoute, std::get<ApiError>(forwarded));
    return;
  }
  const std::string authorization = std::get<ForwardedHeaders>(forwarded).authorization;
  orchestrators_->AskPipelineStatus(
      orchestrators_->any(), authorization, kStatusDeadline,
      [this, exchange](const grpc::Status& status, const v1::PipelineStatus& pipeline) {
        if (exchange->done()) return;  // The page went away.
        if (!status.ok()) {
          replies_->Refuse(*exchange, kStatusRoute, orchestrators_->Refusal(status));
          return;
        }
        const auto respond = [this, exchange](const v1::PipelineStatus& status,
                                              const std::vector<StoredBatch>* batches) {
          if (exchange->done()) return;
          exchange->AddHeader("Cache-Control", "no-store");
          exchange->Respond(200, "application/json", ConsoleStatusJson(status, served_, batches));
          replies_->Count(kStatusRoute, 200);
        };
        if (store_ == nullptr) {
          respond(pipeline, nullptr);
          return;
        }
        // The orchestrator said the token may see everything: the batches too.
        store_->Post([this, pipeline, respond](SqliteDatabase& db) {
          absl::StatusOr<std::vector<StoredBatch>> batches =
              BatchStore(&db).Unfinished(kBatchesShown);
          post_([pipeline, respond, batches = std::move(batches)] {
            respond(pipeline, batches.ok() ? &*batches : nullptr);
          });
        });
      });
}

void ConsoleRoute::Served(const CallOutcome& outcome, absl::Time started) {
  const absl::Time now = absl::Now();
  served_.Add({outcome.request_id, outcome.outcome, outcome.error, outcome.http_status,
               absl::ToDoubleSeconds(now - started), absl::ToUnixMillis(now),
               outcome.heard.first_audio_seconds, outcome.heard.stalls,
               outcome.heard.stalled_seconds});
}

}  // namespace omnistage
