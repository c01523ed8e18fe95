// ForwardedHeaders: what an HTTP request passes on to the orchestrator as gRPC
// metadata, which cannot carry every byte an HTTP header can:
//   authorization  the Authorization header, cleaned (common/bearer_token.h);
//                  one that cannot be passed on is a 401 here, saying why
//                  without echoing the token
//   traceparent    the W3C traceparent header; a malformed one (or one with a
//                  byte metadata cannot carry) is dropped, as
//                  docs/observability.md says
#ifndef OMNISTAGE_GATEWAY_HTTP_FORWARDED_HEADERS_H_
#define OMNISTAGE_GATEWAY_HTTP_FORWARDED_HEADERS_H_

#include <string>
#include <variant>

#include "gateway/http/api_error.h"
#include "gateway/http/http_server.h"

namespace omnistage {

struct ForwardedHeaders {
  std::string authorization;
  std::string traceparent;
};

// `exchange`'s headers as the orchestrator gets them, or the 401 to answer.
std::variant<ForwardedHeaders, ApiError> ForwardedHeadersOf(const HttpExchange& exchange);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_FORWARDED_HEADERS_H_
