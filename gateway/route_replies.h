// RouteReplies: how the gateway answers on its routes. Every answer is counted
// by route and status (omnistage_gateway_requests_total); a 5xx is logged (the
// pipeline or an orchestrator failed a client; a 4xx is the client's own, and
// it was told); an answer with audio, by how a listener heard it
// (omnistage_gateway_time_to_first_audio_seconds and its siblings).
//
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_ROUTE_REPLIES_H_
#define OMNISTAGE_GATEWAY_ROUTE_REPLIES_H_

#include <string>

#include "common/metrics.h"
#include "common/playback_metrics.h"
#include "gateway/http/api_error.h"
#include "gateway/http/http_server.h"

namespace omnistage {

class RouteReplies {
 public:
  // Registers the counter on `registry`.
  explicit RouteReplies(MetricsRegistry* registry);

  // Answers `exchange`, counted under its path.
  void Respond(HttpExchange& exchange, int status, const std::string& content_type,
               const std::string& body);
  // Answers `exchange` with `error` in OpenAI's shape (and its headers, e.g.
  // Retry-After), counted under `route`.
  void Refuse(HttpExchange& exchange, const std::string& route, const ApiError& error);
  // An answer on `route` sent some other way (a stream, an upgrade).
  void Count(const std::string& route, int status);
  // How a listener heard an answer's audio on `route` (none: not counted).
  void Heard(const std::string& route, const PlaybackFigures& figures) {
    heard_.Heard({route}, figures);
  }

 private:
  Family<Counter>& requests_;
  PlaybackMetrics heard_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_ROUTE_REPLIES_H_
