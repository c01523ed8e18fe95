#include "gateway/files_route.h"

#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gateway/batch/file_store.h"
#include "gateway/batch/file_upload.h"
#include "gateway/http/api_error.h"

namespace omnistage {
namespace {

constexpr char kFilesRoute[] = "/v1/files";
constexpr char kFileRoute[] = "/v1/files/{id}";
constexpr char kContentRoute[] = "/v1/files/{id}/content";
// OpenAI's default and largest page.
constexpr int kMaxPage = 10000;

}  // namespace

FilesRoute::FilesRoute(StoreAccess* access, RouteReplies* replies, size_t max_file_bytes)
    : access_(access), replies_(replies), max_file_bytes_(max_file_bytes) {}

void FilesRoute::Handle(std::shared_ptr<HttpExchange> exchange) {
  const std::string path = exchange->path();
  const std::string& method = exchange->method();
  if (access_ == nullptr) {
    replies_->Refuse(*exchange, kFilesRoute,
                     NotServed("This gateway keeps no files: start it with --batch_database "
                               "naming the SQLite file of its Files and Batch APIs."));
    return;
  }
  if (path == kFilesRoute) {
    if (method == "POST") {
      Upload(std::move(exchange));
    } else if (method == "GET") {
      List(std::move(exchange));
    } else {
      replies_->Refuse(*exchange, kFilesRoute, MethodNotAllowed(method, path, "GET or POST"));
    }
    return;
  }
  // /v1/files/{id} or /v1/files/{id}/content.
  std::vector<std::string> parts =
      absl::StrSplit(path.substr(sizeof(kFilesRoute)), absl::MaxSplits('/', 1));
  const std::string& id = parts[0];
  const bool content = parts.size() == 2 && parts[1] == "content";
  if (id.empty() || (parts.size() == 2 && !content)) {
    replies_->Refuse(*exchange, "other", UnknownUrl(method, path));
  } else if (method == "GET") {
    OneFile(std::move(exchange), id, content);
  } else if (method == "DELETE" && !content) {
    Delete(std::move(exchange), id);
  } else {
    replies_->Refuse(*exchange, content ? kContentRoute : kFileRoute,
                     MethodNotAllowed(method, path, content ? "GET" : "GET or DELETE"));
  }
}

void FilesRoute::Upload(std::shared_ptr<HttpExchange> exchange) {
  std::variant<FileUpload, ApiError> parsed =
      ParseFileUpload(exchange->Header("Content-Type"), exchange->body(), max_file_bytes_);
  if (std::holds_alternative<ApiError>(parsed)) {
    replies_->Refuse(*exchange, kFilesRoute, std::get<ApiError>(parsed));
    return;
  }
  auto upload = std::make_shared<FileUpload>(std::get<FileUpload>(std::move(parsed)));
  access_->Run(std::move(exchange), kFilesRoute,
               [upload](SqliteDatabase& db, const std::string& owner) -> StoreAccess::Answer {
                 absl::StatusOr<StoredFile> file = FileStore(&db).Create(
                     owner, upload->purpose, upload->filename, upload->content);
                 if (!file.ok()) return StoreError(file.status());
                 return StoreAccess::Json(FileJson(*file));
               });
}

void FilesRoute::List(std::shared_ptr<HttpExchange> exchange) {
  const std::string purpose = exchange->QueryParam("purpose");
  const std::string after = exchange->QueryParam("after");
  const std::string limit_text = exchange->QueryParam("limit");
  const std::string order = exchange->QueryParam("order");
  int limit = kMaxPage;
  if (!limit_text.empty() &&
      (!absl::SimpleAtoi(limit_text, &limit) || limit < 1 || limit > kMaxPage)) {
    replies_->Refuse(*exchange, kFilesRoute,
                     InvalidRequest("limit", absl::StrCat("Invalid 'limit': '", limit_text,
                                                          "'. Expected 1 to ", kMaxPage, ".")));
    return;
  }
  if (!order.empty() && order != "desc") {
    replies_->Refuse(*exchange, kFilesRoute,
                     InvalidRequest("order", absl::StrCat("Invalid 'order': '", order,
                                                          "'. Files are listed newest first "
                                                          "('desc').")));
    return;
  }
  access_->Run(
      std::move(exchange), kFilesRoute,
      [purpose, after, limit](SqliteDatabase& db, const std::string& owner) -> StoreAccess::Answer {
        // One more than the page: whether there are more.
        absl::StatusOr<std::vector<StoredFile>> files =
            FileStore(&db).List(owner, purpose, after, limit + 1);
        if (!files.ok()) return StoreError(files.status());
        const bool has_more = files->size() > static_cast<size_t>(limit);
        if (has_more) files->pop_back();
        return StoreAccess::Json(FileListJson(*files, has_more));
      });
}

void FilesRoute::OneFile(std::shared_ptr<HttpExchange> exchange, const std::string& id,
                         bool content) {
  if (content) {
    access_->Run(std::move(exchange), kContentRoute,
                 [id](SqliteDatabase& db, const std::string& owner) -> StoreAccess::Answer {
                   absl::StatusOr<std::string> bytes = FileStore(&db).Content(owner, id);
                   if (!bytes.ok()) return StoreError(bytes.status());
                   return StoreAccess::Reply{200, "application/octet-stream", *std::move(bytes)};
                 });
    return;
  }
  access_->Run(std::move(exchange), kFileRoute,
               [id](SqliteDatabase& db, const std::string& owner) -> StoreAccess::Answer {
                 absl::StatusOr<StoredFile> file = FileStore(&db).Get(owner, id);
                 if (!file.ok()) return StoreError(file.status());
                 return StoreAccess::Json(FileJson(*file));
               });
}

void FilesRoute::Delete(std::shared_ptr<HttpExchange> exchange, const std::string& id) {
  access_->Run(std::move(exchange), kFileRoute,
               [id](SqliteDatabase& db, const std::string& owner) -> StoreAccess::Answer {
                 if (absl::Status status = FileStore(&db).Delete(owner, id); !status.ok()) {
                   return StoreError(status);
                 }
                 return StoreAccess::Json(FileDeletedJson(id));
               });
}

}  // namespace omnistage
