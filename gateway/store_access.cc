#include "gateway/store_access.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "gateway/http/forwarded_headers.h"

namespace omnistage {
namespace {

// How long the orchestrator gets to say whom a token stands for.
constexpr std::chrono::seconds kCallerDeadline{5};

}  // namespace

StoreAccess::StoreAccess(StoreThread* store, Orchestrators* orchestrators, RouteReplies* replies,
                         LoopPoster post)
    : store_(store), orchestrators_(orchestrators), replies_(replies), post_(std::move(post)) {}

void StoreAccess::Run(std::shared_ptr<HttpExchange> exchange, std::string route, Work work,
                      std::function<void()> answered) {
  std::variant<ForwardedHeaders, ApiError> forwarded = ForwardedHeadersOf(*exchange);
  if (std::holds_alternative<ApiError>(forwarded)) {
    replies_->Refuse(*exchange, route, std::get<ApiError>(forwarded));
    return;
  }
  orchestrators_->AskCaller(
      orchestrators_->any(), std::get<ForwardedHeaders>(forwarded).authorization, kCallerDeadline,
      [this, exchange, route = std::move(route), work = std::move(work),
       answered = std::move(answered)](const grpc::Status& status,
                                       const v1::CallerInfo& caller) mutable {
        if (exchange->done()) return;  // The client went away.
        if (!status.ok()) {
          replies_->Refuse(*exchange, route, orchestrators_->Refusal(status));
          return;
        }
        store_->Post([this, exchange, route = std::move(route), work = std::move(work),
                      answered = std::move(answered),
                      owner = caller.identity()](SqliteDatabase& db) {
          Answer answer = work(db, owner);
          post_([this, exchange, route, answered, answer = std::move(answer)] {
            if (std::holds_alternative<ApiError>(answer)) {
              if (!exchange->done()) replies_->Refuse(*exchange, route, std::get<ApiError>(answer));
              return;
            }
            // Done (a batch created) whether or not the client still waits.
            if (answered) answered();
            if (exchange->done()) return;
            const Reply& reply = std::get<Reply>(answer);
            exchange->Respond(reply.status, reply.content_type, reply.body);
            replies_->Count(route, reply.status);
          });
        });
      });
}

ApiError StoreError(const absl::Status& status) {
  ApiError error = FromStatus(status);
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      error.type = "invalid_request_error";
      break;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
      break;
    case absl::StatusCode::kResourceExhausted:
      error.http_status = 507;
      error.type = "server_error";
      error.code = "insufficient_storage";
      error.retry_after.reset();
      LogWarning(absl::StrCat("batch store full: ", status.message()));
      break;
    default:
      error.http_status = 500;
      error.type = "server_error";
      error.code = "";
      LogError(absl::StrCat("batch store failed: ", status.message()));
      break;
  }
  return error;
}

}  // namespace omnistage
