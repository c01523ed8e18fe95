// FilesRoute: the gateway's OpenAI Files API (docs/openai.md, "Files"), the
// Batch API's input and output files, kept in its durable store:
//   POST   /v1/files               upload (multipart: file, purpose "batch")
//   GET    /v1/files               the caller's files, newest first (purpose,
//                                  limit, after)
//   GET    /v1/files/{id}          one File object
//   GET    /v1/files/{id}/content  its bytes
//   DELETE /v1/files/{id}          gone
// Each file is its uploader's (StoreAccess): another identity is told it does
// not exist. Without a store (no --batch_database) every route answers 404,
// saying how to keep files.
//
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_FILES_ROUTE_H_
#define OMNISTAGE_GATEWAY_FILES_ROUTE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "gateway/http/http_server.h"
#include "gateway/route_replies.h"
#include "gateway/store_access.h"

namespace omnistage {

class FilesRoute {
 public:
  // `access` (null: no store) and `replies` are not owned and outlive the
  // route. An upload's file is at most `max_file_bytes`.
  FilesRoute(StoreAccess* access, RouteReplies* replies, size_t max_file_bytes);

  // A request whose path is /v1/files or starts with /v1/files/.
  void Handle(std::shared_ptr<HttpExchange> exchange);

 private:
  void Upload(std::shared_ptr<HttpExchange> exchange);
  void List(std::shared_ptr<HttpExchange> exchange);
  void OneFile(std::shared_ptr<HttpExchange> exchange, const std::string& id, bool content);
  void Delete(std::shared_ptr<HttpExchange> exchange, const std::string& id);

  StoreAccess* const access_;
  RouteReplies* const replies_;
  const size_t max_file_bytes_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_FILES_ROUTE_H_
