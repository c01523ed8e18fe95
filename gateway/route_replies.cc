#include "gateway/route_replies.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace omnistage {

RouteReplies::RouteReplies(MetricsRegistry* registry)
    : requests_(registry->AddCounter("omnistage_gateway_requests_total",
                                     "HTTP requests answered, by route and status.",
                                     {"route", "status"})),
      heard_(registry, "omnistage_gateway", {"route"}) {}

void RouteReplies::Count(const std::string& route, int status) {
  requests_.With({route, absl::StrCat(status)}).Increment();
  if (status >= 500) LogWarning(absl::StrCat(route, " answered HTTP ", status));
}

void RouteReplies::Respond(HttpExchange& exchange, int status, const std::string& content_type,
                           const std::string& body) {
  exchange.Respond(status, content_type, body);
  Count(exchange.path(), status);
}

void RouteReplies::Refuse(HttpExchange& exchange, const std::string& route, const ApiError& error) {
  for (const auto& [name, value] : error.Headers()) exchange.AddHeader(name, value);
  exchange.Respond(error.http_status, "application/json", error.Json());
  Count(route, error.http_status);
}

}  // namespace omnistage
