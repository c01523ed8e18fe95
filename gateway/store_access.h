// StoreAccess: how the Files and Batch routes (docs/openai.md, "Files" and
// "Batches") reach the gateway's durable store for a client. First whom the
// client's bearer token stands for, as the orchestrator's authentication
// says (GetCaller): that identity owns what the client creates and is the
// only one that sees it. Then the route's work on the store's thread
// (store_thread.h), never on the HTTP loop; its answer is sent on the loop.
//
//   access.Run(exchange, "/v1/files/{id}",
//              [id](SqliteDatabase& db, const std::string& owner) -> StoreAccess::Answer {
//                absl::StatusOr<StoredFile> file = FileStore(&db).Get(owner, id);
//                if (!file.ok()) return StoreError(file.status());
//                return StoreAccess::Json(FileJson(*file));
//              });
//
// Loop thread only (Run); the work runs on the store's thread.
#ifndef OMNISTAGE_GATEWAY_STORE_ACCESS_H_
#define OMNISTAGE_GATEWAY_STORE_ACCESS_H_

#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "gateway/batch/sqlite_database.h"
#include "gateway/batch/store_thread.h"
#include "gateway/http/api_error.h"
#include "gateway/http/http_server.h"
#include "gateway/orchestrators.h"
#include "gateway/route_replies.h"

namespace omnistage {

class StoreAccess {
 public:
  struct Reply {
    int status = 200;
    std::string content_type;
    std::string body;
  };
  using Answer = std::variant<Reply, ApiError>;
  using Work = std::function<Answer(SqliteDatabase& db, const std::string& owner)>;

  // None is owned; each outlives the access.
  StoreAccess(StoreThread* store, Orchestrators* orchestrators, RouteReplies* replies,
              LoopPoster post);

  // Learns the client's identity, runs `work` for it on the store's thread,
  // and answers `exchange` (counted under `route`) with what it returns. A
  // token the orchestrator refuses, or an orchestrator out of reach, is
  // answered as the orchestrator said (401, 503, ...) and `work` never runs.
  // `answered` (may be empty) runs on the loop once a Reply was sent.
  void Run(std::shared_ptr<HttpExchange> exchange, std::string route, Work work,
           std::function<void()> answered = nullptr);

  // A 200 with a JSON body.
  static Reply Json(std::string body) { return Reply{200, "application/json", std::move(body)}; }

 private:
  StoreThread* const store_;
  Orchestrators* const orchestrators_;
  RouteReplies* const replies_;
  const LoopPoster post_;
};

// The answer for a store operation's error: NOT_FOUND 404 (OpenAI's message
// for an id it never issued), INVALID_ARGUMENT and ALREADY_EXISTS 400, a full
// disk (RESOURCE_EXHAUSTED) 507, anything else 500 (logged: the store
// failed, not the client).
ApiError StoreError(const absl::Status& status);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_STORE_ACCESS_H_
