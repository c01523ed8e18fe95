// ConsoleRoute: the gateway's /console routes (docs/console.md), and the chat
// completions it served, which the console shows.
//
// The live console's page and files are built into the binary
// (console/assets.h): anyone may load them, they hold no data.
// /console/status, which the page polls with the token it was given, puts
// that token to an orchestrator's GetPipelineStatus as a chat completion's goes
// to its Generate, so with tokens on only an admin's is answered (a user's is
// PERMISSION_DENIED: 403; none or an unknown one, UNAUTHENTICATED: 401), and
// without tokens anyone's is. With the Batch API's store it lists the
// batches not finished, every owner's (so an admin's token sees them all).
//
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_CONSOLE_ROUTE_H_
#define OMNISTAGE_GATEWAY_CONSOLE_ROUTE_H_

#include <cstddef>
#include <memory>

#include "absl/time/time.h"
#include "gateway/batch/store_thread.h"
#include "gateway/chat/chat_call.h"
#include "gateway/console/served_requests.h"
#include "gateway/http/http_server.h"
#include "gateway/orchestrators.h"
#include "gateway/route_replies.h"

namespace omnistage {

class ConsoleRoute {
 public:
  // No pointer is owned; each outlives the route. `store`: the Batch API's
  // (null: none), whose batches not finished the status shows.
  ConsoleRoute(Orchestrators* orchestrators, RouteReplies* replies, StoreThread* store,
               LoopPoster post);

  // A GET of /console or a path under /console/.
  void Handle(std::shared_ptr<HttpExchange> exchange);
  // A chat completion that started at `started` ended as `outcome`.
  void Served(const CallOutcome& outcome, absl::Time started);

 private:
  // /console/status: an orchestrator's status (any: the console is for a
  // pipeline that is not ready too), with the client's token.
  void Status(std::shared_ptr<HttpExchange> exchange);

  static constexpr size_t kServedKept = 50;
  // The most batches the status lists.
  static constexpr int kBatchesShown = 100;
  Orchestrators* const orchestrators_;
  RouteReplies* const replies_;
  StoreThread* const store_;
  const LoopPoster post_;
  ServedRequests served_{kServedKept};
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CONSOLE_ROUTE_H_
