#include "gateway/batches_route.h"

#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gateway/batch/batch_input.h"
#include "gateway/batch/batch_json.h"
#include "gateway/batch/batch_store.h"
#include "gateway/batch/file_store.h"
#include "gateway/http/api_error.h"

namespace omnistage {
namespace {

constexpr char kBatchesRoute[] = "/v1/batches";
constexpr char kBatchRoute[] = "/v1/batches/{id}";
constexpr char kCancelRoute[] = "/v1/batches/{id}/cancel";
// OpenAI's default and largest page of batches.
constexpr int kDefaultPage = 20;
constexpr int kMaxPage = 100;

}  // namespace

BatchesRoute::BatchesRoute(Options options, StoreAccess* access, BatchRunner* runner,
                           RouteReplies* replies)
    : options_(options), access_(access), runner_(runner), replies_(replies) {}

void BatchesRoute::Handle(std::shared_ptr<HttpExchange> exchange) {
  const std::string path = exchange->path();
  const std::string& method = exchange->method();
  if (access_ == nullptr) {
    replies_->Refuse(*exchange, kBatchesRoute,
                     NotServed("This gateway runs no batches: start it with --batch_database "
                               "naming the SQLite file of its Files and Batch APIs."));
    return;
  }
  if (path == kBatchesRoute) {
    if (method == "POST") {
      Create(std::move(exchange));
    } else if (method == "GET") {
      List(std::move(exchange));
    } else {
      replies_->Refuse(*exchange, kBatchesRoute, MethodNotAllowed(method, path, "GET or POST"));
    }
    return;
  }
  // /v1/batches/{id} or /v1/batches/{id}/cancel.
  std::vector<std::string> parts =
      absl::StrSplit(path.substr(sizeof(kBatchesRoute)), absl::MaxSplits('/', 1));
  const std::string& id = parts[0];
  const bool cancel = parts.size() == 2 && parts[1] == "cancel";
  if (id.empty() || (parts.size() == 2 && !cancel)) {
    replies_->Refuse(*exchange, "other", UnknownUrl(method, path));
  } else if (method == (cancel ? "POST" : "GET")) {
    One(std::move(exchange), id, cancel);
  } else {
    replies_->Refuse(*exchange, cancel ? kCancelRoute : kBatchRoute,
                     MethodNotAllowed(method, path, cancel ? "POST" : "GET"));
  }
}

void BatchesRoute::Create(std::shared_ptr<HttpExchange> exchange) {
  std::variant<BatchCreate, ApiError> parsed = ParseBatchCreate(exchange->body());
  if (std::holds_alternative<ApiError>(parsed)) {
    replies_->Refuse(*exchange, kBatchesRoute, std::get<ApiError>(parsed));
    return;
  }
  BatchCreate create = std::get<BatchCreate>(std::move(parsed));
  if (create.endpoint == "/v1/audio/speech" && !options_.speech) {
    replies_->Refuse(*exchange, kBatchesRoute,
                     InvalidRequest("endpoint",
                                    "This gateway serves no speech: a batch of "
                                    "/v1/audio/speech has nothing to run on "
                                    "(--speech_orchestrator)."));
    return;
  }
  const int64_t max_lines = options_.max_lines;
  access_->Run(
      std::move(exchange), kBatchesRoute,
      [create = std::move(create), max_lines](SqliteDatabase& db,
                                              const std::string& owner) -> StoreAccess::Answer {
        FileStore files(&db);
        absl::StatusOr<StoredFile> file = files.Get(owner, create.input_file_id);
        if (!file.ok()) return StoreError(file.status());
        if (file->purpose != "batch") {
          return InvalidRequest("input_file_id",
                                absl::StrCat("File ", file->id, " has purpose '", file->purpose,
                                             "'; a batch reads a file uploaded with purpose "
                                             "'batch'."));
        }
        absl::StatusOr<std::string> content = files.Content(owner, create.input_file_id);
        if (!content.ok()) return StoreError(content.status());
        std::variant<std::vector<BatchInputLine>, BatchInputError> lines =
            ParseBatchInput(*content, create.endpoint, max_lines);
        if (std::holds_alternative<BatchInputError>(lines)) {
          return InputFileError(std::get<BatchInputError>(lines));
        }
        absl::StatusOr<StoredBatch> batch = BatchStore(&db).Create(
            owner, create.input_file_id, create.endpoint, create.completion_window, create.metadata,
            std::get<std::vector<BatchInputLine>>(lines), absl::Now());
        if (!batch.ok()) return StoreError(batch.status());
        return StoreAccess::Json(BatchJson(*batch));
      },
      [runner = runner_] { runner->Wake(); });
}

void BatchesRoute::List(std::shared_ptr<HttpExchange> exchange) {
  const std::string after = exchange->QueryParam("after");
  const std::string limit_text = exchange->QueryParam("limit");
  int limit = kDefaultPage;
  if (!limit_text.empty() &&
      (!absl::SimpleAtoi(limit_text, &limit) || limit < 1 || limit > kMaxPage)) {
    replies_->Refuse(*exchange, kBatchesRoute,
                     InvalidRequest("limit", absl::StrCat("Invalid 'limit': '", limit_text,
                                                          "'. Expected 1 to ", kMaxPage, ".")));
    return;
  }
  access_->Run(std::move(exchange), kBatchesRoute,
               [after, limit](SqliteDatabase& db, const std::string& owner) -> StoreAccess::Answer {
                 // One more than the page: whether there are more.
                 absl::StatusOr<std::vector<StoredBatch>> batches =
                     BatchStore(&db).List(owner, after, limit + 1);
                 if (!batches.ok()) return StoreError(batches.status());
                 const bool has_more = batches->size() > static_cast<size_t>(limit);
                 if (has_more) batches->pop_back();
                 return StoreAccess::Json(BatchListJson(*batches, has_more));
               });
}

void BatchesRoute::One(std::shared_ptr<HttpExchange> exchange, const std::string& id, bool cancel) {
  access_->Run(
      std::move(exchange), cancel ? kCancelRoute : kBatchRoute,
      [id, cancel](SqliteDatabase& db, const std::string& owner) -> StoreAccess::Answer {
        BatchStore batches(&db);
        absl::StatusOr<StoredBatch> batch =
            cancel ? batches.Cancel(owner, id, absl::Now()) : batches.Get(owner, id);
        if (!batch.ok()) return StoreError(batch.status());
        return StoreAccess::Json(BatchJson(*batch));
      },
      // A cancelled batch with nothing running is finished at once.
      cancel ? std::function<void()>([runner = runner_] { runner->Wake(); }) : nullptr);
}

}  // namespace omnistage
