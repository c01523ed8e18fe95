// BatchesRoute: the gateway's OpenAI Batch API (docs/openai.md, "Batches"):
//   POST /v1/batches              create, over a file uploaded with purpose
//                                 batch (its lines checked: nothing starts
//                                 from a file that cannot run)
//   GET  /v1/batches              the caller's batches, newest first
//                                 (limit, after)
//   GET  /v1/batches/{id}         one Batch object: status, request_counts,
//                                 output_file_id, error_file_id
//   POST /v1/batches/{id}/cancel  stop it: what ran stays in its files
// Each batch is its creator's (StoreAccess); BatchRunner runs the lines.
// Without a store (no --batch_database) every route answers 404, saying how
// to keep batches.
//
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_BATCHES_ROUTE_H_
#define OMNISTAGE_GATEWAY_BATCHES_ROUTE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "gateway/batch_runner.h"
#include "gateway/http/http_server.h"
#include "gateway/route_replies.h"
#include "gateway/store_access.h"

namespace omnistage {

class BatchesRoute {
 public:
  struct Options {
    // The most lines a batch may have (OpenAI's: 50,000).
    int64_t max_lines = 50000;
    // Whether /v1/audio/speech lines have a pipeline to run on.
    bool speech = false;
  };

  // `access` and `runner` (null: no store), and `replies`, are not owned and
  // outlive the route.
  BatchesRoute(Options options, StoreAccess* access, BatchRunner* runner, RouteReplies* replies);

  // A request whose path is /v1/batches or starts with /v1/batches/.
  void Handle(std::shared_ptr<HttpExchange> exchange);

 private:
  void Create(std::shared_ptr<HttpExchange> exchange);
  void List(std::shared_ptr<HttpExchange> exchange);
  void One(std::shared_ptr<HttpExchange> exchange, const std::string& id, bool cancel);

  const Options options_;
  StoreAccess* const access_;
  BatchRunner* const runner_;
  RouteReplies* const replies_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCHES_ROUTE_H_
